"""Property tests: generated valid jobs round-trip; generated malformed documents raise only JobValidationError.

The examples below add up to well over 1,000 per run (see each ``max_examples``); ``deadline=None`` because a
loaded 2-core CI machine makes per-example timings meaningless.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pai_jupyter.protocol import ConversionError, Job, JobValidationError, TaskRole, job_from_document
from tests.helpers.jobdocs import v1_doc, v2_doc
from tests.helpers.protocol_docs import (
    JSONISH,
    TEXT,
    v1_docs,
    v2_docs,
)
from tests.properties import examples

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}

# ---- strategies for valid documents -------------------------------------------------------------------------


# ---- round trips --------------------------------------------------------------------------------------------


@settings(max_examples=examples(300), **SETTINGS)
@given(v1_docs())
def test_v1_jobs_round_trip_through_v2(doc: dict[str, Any]) -> None:
    text = json.dumps(doc)
    job = Job.from_text(text)
    assert job.source_text == text and job.source_format == "v1"
    v2 = job.to_v2()
    assert job_from_document(v2) == job  # v1 -> model -> v2 -> model
    assert Job.from_text(job.to_yaml()) == job  # ... and through YAML text
    v1 = job.to_v1()
    assert job_from_document(v1) == job  # and back to v1: nothing v1 said is lost
    said = {k: v for k, v in doc.items() if k != "taskRoles" and v not in ("", "default", {}, 0)}
    assert {k: v1.get(k) for k in said} == said


@settings(max_examples=examples(250), **SETTINGS)
@given(v2_docs())
def test_v2_jobs_round_trip_and_to_v1_is_valid_or_refused(doc: dict[str, Any]) -> None:
    job = job_from_document(copy.deepcopy(doc))
    assert job.source_format == "v2"
    assert job_from_document(job.to_v2()) == job
    assert Job.from_text(job.to_yaml()) == job
    try:
        v1 = job.to_v1()
    except ConversionError as exc:
        assert exc.problems and all(p.path and p.message for p in exc.problems)
        return
    back = job_from_document(v1)  # what to_v1 writes is always valid v1 ...
    assert back.to_v1() == v1  # ... and stable
    assert [
        (r.name, r.instances, r.cpu, r.memory_mb, r.gpu, r.shm_mb, r.min_failed, r.min_succeeded, r.command)
        for r in back.task_roles
    ] == [
        (r.name, r.instances, r.cpu, r.memory_mb, r.gpu, r.shm_mb, r.min_failed, r.min_succeeded, r.command)
        for r in job.task_roles
    ]
    assert (back.parameters, back.retry_count, back.image) == (job.parameters, job.retry_count, job.image)


@settings(max_examples=examples(100), **SETTINGS)
@given(
    name=st.text(max_size=20),
    roles=st.lists(
        st.fixed_dictionaries(
            {"name": st.text(max_size=8), "command": st.text(max_size=8)},
            optional={
                "instances": st.integers(-2, 4),
                "cpu": st.integers(-1, 4),
                "memory_mb": st.integers(0, 300),
                "shm_mb": st.integers(-1, 300),
                "gpu": st.integers(-1, 2),
                "min_failed": st.integers(0, 5),
                "min_succeeded": st.one_of(st.none(), st.integers(0, 5)),
            },
        ),
        max_size=3,
    ),
)
def test_builders_validate_or_raise_the_one_error(name: str, roles: list[dict[str, Any]]) -> None:
    try:
        job = Job(name=name, image="img", task_roles=[TaskRole(**r) for r in roles])
    except JobValidationError as exc:
        assert exc.problems and all(p.message for p in exc.problems)
        return
    try:
        v2 = job.to_v2()
    except ConversionError:
        return
    assert job_from_document(v2) == job  # whatever a builder accepts, v2 accepts


# ---- malformed documents ------------------------------------------------------------------------------------

BAD_NAMES = st.one_of(
    st.just(""),
    st.text(min_size=1, max_size=20).filter(lambda s: not s.isalnum()),
    st.sampled_from(["a b", "1worker", "x/y", "é", "a\n", "worker-1", "a.b"]),
)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(max_value=-1),
    st.integers(min_value=2**64),
    st.floats(),
    st.just(math.inf),
    st.just(math.nan),
    BAD_NAMES,
    st.text(min_size=10_000, max_size=20_000),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.integers(1, 150).map(lambda d: _nest(d)),  # past MAX_DEPTH; deeper is test_deep_nesting_anywhere's
)


def _nest(depth: int) -> Any:
    value: Any = 0
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field's path, down to the depth a job document really has (not into deep junk)."""
    out = [prefix] if prefix else []
    if len(prefix) >= 6:
        return out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, path: tuple[Any, ...], how: str, junk: Any) -> Any:
    doc = copy.deepcopy(doc)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent[f"unknown_{len(parent)}"] = junk
    else:
        parent[last] = junk
    return doc


@st.composite
def mutated(draw: st.DrawFn, docs: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    doc = draw(docs)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        doc = _mutate(
            doc, draw(st.sampled_from(paths)), draw(st.sampled_from(["replace", "delete", "add"])), draw(JUNK)
        )
    return doc


def _load_or_reject(doc: Any) -> None:
    """Either a Job or JobValidationError (with every problem in plain words); never anything else."""
    for attempt in (lambda: job_from_document(doc), lambda: Job.from_text(json.dumps(doc))):
        try:
            attempt()
        except JobValidationError as exc:
            assert exc.problems and all(isinstance(p.path, str) and p.message for p in exc.problems)


@settings(max_examples=examples(200), **SETTINGS)
@given(mutated(v1_docs()))
def test_mutated_v1_documents_raise_only_job_validation_error(doc: dict[str, Any]) -> None:
    _load_or_reject(doc)


@settings(max_examples=examples(200), **SETTINGS)
@given(mutated(v2_docs()))
def test_mutated_v2_documents_raise_only_job_validation_error(doc: dict[str, Any]) -> None:
    _load_or_reject(doc)


# Mutations that are always invalid, with the field path the error must name.
def _v1_breakages() -> st.SearchStrategy[tuple[str, Any, str]]:
    role_fields = ["taskNumber", "cpuNumber", "memoryMB", "gpuNumber"]
    return st.one_of(
        st.tuples(st.just("jobName"), BAD_NAMES.filter(lambda s: not _v1_job_name(s)), st.just("jobName")),
        st.tuples(st.just("taskRoles.0.name"), st.sampled_from(["a-b", "", "a b", "ü"]), st.just("taskRoles[0].name")),
        st.tuples(st.just("taskRoles.0.memoryMB"), st.integers(max_value=99), st.just("taskRoles[0].memoryMB")),
        st.tuples(st.just("taskRoles.0.taskNumber"), st.integers(max_value=0), st.just("taskRoles[0].taskNumber")),
        st.tuples(st.just("taskRoles.0.cpuNumber"), st.integers(max_value=0), st.just("taskRoles[0].cpuNumber")),
        st.tuples(st.just("taskRoles.0.gpuNumber"), st.integers(max_value=-1), st.just("taskRoles[0].gpuNumber")),
        st.tuples(st.just("retryCount"), st.integers(max_value=-1), st.just("retryCount")),
        st.tuples(
            st.sampled_from(role_fields).map(lambda f: f"taskRoles.0.{f}"),
            st.one_of(TEXT, st.floats(), st.booleans(), st.none(), st.lists(st.integers(), max_size=2)),
            st.just("taskRoles[0]."),
        ),
        st.tuples(
            st.sampled_from(["jobName", "image", "taskRoles", "taskRoles.0.command", "taskRoles.0.memoryMB"]),
            st.just(_DELETE),
            st.just(""),
        ),
        st.tuples(st.just("taskRoles.0.command"), st.sampled_from(["", " ", "\n\t"]), st.just("taskRoles[0].command")),
        st.tuples(
            st.just("jobEnvs"),
            st.dictionaries(st.sampled_from(["a-b", "x y", "é-"]), st.just(1), min_size=1),
            st.just("jobEnvs."),
        ),
        st.tuples(st.just("extras"), st.one_of(st.lists(st.integers()), TEXT, st.integers()), st.just("extras")),
        st.tuples(st.just("surprise"), JSONISH, st.just("surprise")),
    )


_DELETE = object()


def _v1_job_name(s: str) -> bool:
    import re

    return re.fullmatch(r"[A-Za-z0-9\-._~]+", s) is not None


def _set(doc: dict[str, Any], dotted: str, value: Any) -> None:
    parts: list[Any] = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    parent: Any = doc
    for part in parts[:-1]:
        parent = parent[part]
    if value is _DELETE:
        del parent[parts[-1]]
    else:
        parent[parts[-1]] = value


@settings(max_examples=examples(200), **SETTINGS)
@given(v1_docs(), _v1_breakages())
def test_broken_v1_documents_name_the_field(doc: dict[str, Any], breakage: tuple[str, Any, str]) -> None:
    where, value, path = breakage
    _set(doc, where, value)
    for load in (lambda: job_from_document(doc), lambda: Job.from_text(json.dumps(doc))):
        with pytest.raises(JobValidationError) as info:
            load()
        assert type(info.value) is JobValidationError
        paths = [p.path for p in info.value.problems]
        want = path or where.replace(".0", "[0]")
        assert any(p.startswith(want) for p in paths), (want, info.value.problems)


@settings(max_examples=examples(100), **SETTINGS)
@given(
    v2_docs(),
    st.sampled_from(
        [
            ("name", "a.b", "name"),
            ("type", "service", "type"),
            ("protocolVersion", 3, "protocolVersion"),
            ("jobRetryCount", -1, "jobRetryCount"),
            ("taskRoles", {}, "taskRoles"),
            ("taskRoles", [], "taskRoles"),
            ("prerequisites", [], "taskRoles."),
            ("defaults", {"deployment": "nope"}, "defaults.deployment"),
            ("extras", {"gangAllocation": "no"}, "extras.gangAllocation"),
            ("unknown", 1, "unknown"),
        ]
    ),
)
def test_broken_v2_documents_name_the_field(doc: dict[str, Any], breakage: tuple[str, Any, str]) -> None:
    key, value, path = breakage
    doc[key] = value
    with pytest.raises(JobValidationError) as info:
        Job.from_text(json.dumps(doc))
    assert any(p.path.startswith(path) for p in info.value.problems), (path, info.value.problems)


@settings(max_examples=examples(100), **SETTINGS)
@given(v2_docs(), st.data())
def test_broken_v2_roles_name_the_role(doc: dict[str, Any], data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(doc["taskRoles"])))
    role = doc["taskRoles"][name]
    field, value = data.draw(
        st.sampled_from(
            [
                ("instances", 0),
                ("dockerImage", "missing_image"),
                ("commands", []),
                ("commands", ["  "]),
                ("resourcePerInstance", {"cpu": 0, "memoryMB": 100, "gpu": 0}),
                ("taskRetryCount", -1),
                ("completion", {"minFailedInstances": 99}),
                ("extraContainerOptions", {"shmMB": 10**9}),
                ("bogus", 1),
            ]
        )
    )
    role[field] = value
    with pytest.raises(JobValidationError) as info:
        Job.from_text(json.dumps(doc))
    assert any(p.path.startswith(f"taskRoles.{name}.{field}") for p in info.value.problems), info.value.problems
    doc["taskRoles"]["1" + name] = doc["taskRoles"].pop(name)  # and a role name v2 forbids is named too
    with pytest.raises(JobValidationError) as info:
        job_from_document(doc)
    assert f"taskRoles.1{name}" in [p.path for p in info.value.problems]


@settings(max_examples=examples(150), **SETTINGS)
@given(v1_docs(), st.data())
def test_invalid_utf8_is_reported_not_raised(doc: dict[str, Any], data: st.DataObject) -> None:
    raw = json.dumps(doc).encode()
    at = data.draw(st.integers(0, len(raw)))
    bad = data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\xf8\x88\x80\x80\x80"]))
    with pytest.raises(JobValidationError) as info:
        Job.from_text(raw[:at] + bad + raw[at:], source="bad.json")
    assert [p.message for p in info.value.problems] == [f"the document is not valid UTF-8 (byte {at})"]


@settings(max_examples=examples(150), **SETTINGS)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300),
        st.text(alphabet="{}[]:,-\"' \n\t&*!|>%@`#?abc123", max_size=200),
    )
)
def test_arbitrary_bytes_and_text_raise_only_job_validation_error(data: bytes | str) -> None:
    try:
        job = Job.from_text(data)
    except JobValidationError as exc:
        assert exc.problems
    else:  # random input that is a valid job is vanishingly unlikely; if it is, it must really be one
        assume(False)
        assert job.task_roles


@settings(max_examples=examples(50), **SETTINGS)
@given(st.integers(1, 5_000), st.sampled_from(["extras", "parameters", "taskRoles", "jobEnvs", "name"]), st.booleans())
def test_deep_nesting_anywhere(depth: int, where: str, as_v2: bool) -> None:
    doc = v2_doc() if as_v2 else v1_doc()
    doc[where] = _nest(depth)
    for load in (lambda: job_from_document(doc), lambda: Job.from_text(json.dumps(doc) if depth < 400 else "x")):
        try:
            load()
        except JobValidationError as exc:
            assert exc.problems
