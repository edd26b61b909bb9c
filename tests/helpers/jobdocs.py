"""Small builders for valid v1 / v2 job documents, and helpers to read a JobValidationError's problems."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pai_jupyter.protocol import Job, JobValidationError, job_from_document


def v1_role(**over: Any) -> dict[str, Any]:
    role = {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 512, "gpuNumber": 0, "command": "echo hi"}
    role.update(over)
    return role


def v1_doc(*roles: dict[str, Any], **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"jobName": "job1", "image": "python:3.11", "taskRoles": list(roles) or [v1_role()]}
    doc.update(over)
    return doc


def v2_role(**over: Any) -> dict[str, Any]:
    role: dict[str, Any] = {
        "instances": 1,
        "dockerImage": "img",
        "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0},
        "commands": ["echo hi"],
    }
    role.update(over)
    return role


def v2_doc(roles: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "protocolVersion": 2,
        "name": "job1",
        "type": "job",
        "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "python:3.11"}],
        "taskRoles": roles if roles is not None else {"worker": v2_role()},
    }
    doc.update(over)
    return doc


def problems_of(doc: Any) -> list[str]:
    """Every problem of an invalid document, as ``path: message`` lines (fails the test if it is valid)."""
    with pytest.raises(JobValidationError) as info:
        job_from_document(copy.deepcopy(doc))
    assert type(info.value) is JobValidationError
    return [str(p) for p in info.value.problems]


def assert_problem(doc: Any, path: str, fragment: str) -> list[str]:
    """The document is rejected with a problem at exactly ``path`` whose message contains ``fragment``."""
    found = problems_of(doc)
    matches = [p for p in found if p.startswith(f"{path}: ") and fragment in p[len(path) + 2 :]]
    assert matches, f"no problem at {path!r} containing {fragment!r}; got {found}"
    return found


def valid(doc: dict[str, Any]) -> Job:
    return job_from_document(copy.deepcopy(doc))
