"""What a wire reader (``v1.py``, ``v2.py``) hands the model, and which reader a document takes. The readers
depend on nothing of the model but its type; ``Job.from_dict`` (model.py) builds the Job from their answer."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from .errors import Problem


class Wire(NamedTuple):
    """A document read: the job's data under the model's field names, the document's path of each field (the
    model's problems are reported where the document said it), the problems its schema found, its version."""

    data: dict[str, Any]
    paths: dict[str, str]
    problems: list[Problem]
    version: Literal["v1", "v2"]


def detect_version(doc: dict[str, Any]) -> str:
    """v2 when it says protocolVersion (or looks like v2: a taskRoles mapping); else v1."""
    if "protocolVersion" in doc:
        return "v2"
    if "jobName" not in doc and isinstance(doc.get("taskRoles"), dict):
        return "v2"
    return "v1"
