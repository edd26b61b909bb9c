"""Our v2 validator against OpenPAI's own: every generated document OpenPAI's REST server accepts, we accept;
every one it refuses, we refuse; and everything we write validates against the official protocol schema file
and the server's validator (``openpai_oracle``).

Deliberate differences (docs/openpai.md): resources must be runnable here (cpu >= 1,
memoryMB >= 100, gpu >= 0, shmMB 0..memoryMB, port counts >= 1), completion counts within -1..instances,
a role needs a non-blank command, and the ``extras`` keys this product reads are checked. The generators below
stay inside those bounds; everything else OpenPAI allows, they use.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from pai_jupyter.protocol import Job, JobValidationError, job_from_document
from pai_jupyter.protocol.edit import rename_text
from tests.helpers.openpai_oracle import official_problems, server_problems
from tests.helpers.protocol_docs import v1_docs
from tests.properties import examples

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
IDENT = st.builds(str.__add__, st.sampled_from(ALNUM[:52] + "_"), st.text(ALNUM + "_", max_size=8))
NAMES = st.text(ALNUM + "_-", min_size=1, max_size=20)
TEXT = st.text(max_size=20)
COMMAND = st.text(min_size=1, max_size=40).filter(str.strip)
VERSION = st.one_of(TEXT, st.integers(0, 9))
EXAMPLES = Path(__file__).resolve().parents[2] / "notebooks" / "jobs"


def _base(draw: st.DrawFn, item: dict[str, Any], *, numbers: bool = True) -> dict[str, Any]:
    """OpenPAI's base fields, which it merges into prerequisites and deployments."""
    if draw(st.booleans()):
        item["protocolVersion"] = draw(st.sampled_from([2, "2"]))
    if draw(st.booleans()):
        item["version"] = draw(VERSION if numbers else TEXT)
    for key in ("contributor", "description"):
        if draw(st.booleans()):
            item[key] = draw(TEXT)
    return item


@st.composite
def openpai_docs(draw: st.DrawFn, numbers: bool = True) -> dict[str, Any]:
    """A v2 document OpenPAI's REST server accepts, using the freedoms its validator leaves."""
    images = draw(st.lists(NAMES, min_size=1, max_size=2, unique=True))
    prereqs: list[dict[str, Any]] = []
    for n in images:
        p = _base(draw, {"name": n, "type": "dockerimage", "uri": draw(TEXT.filter(str.strip))}, numbers=numbers)
        if draw(st.booleans()):
            p["auth"] = {k: draw(TEXT) for k in ("username", "password", "registryuri") if draw(st.booleans())}
        prereqs.append(p)
    refs: dict[str, list[str]] = {}
    for kind in ("data", "script", "output"):
        for n in draw(st.lists(NAMES, max_size=2, unique=True)):
            p = _base(draw, {"name": n, "type": kind}, numbers=numbers)
            if draw(st.booleans()):
                p["uri"] = draw(st.lists(TEXT, min_size=1, max_size=2)) if kind == "data" else draw(TEXT)
            if draw(st.booleans()):
                p["plugin"] = draw(TEXT)
            if draw(st.booleans()):
                p["require"] = draw(st.lists(TEXT, max_size=2))
            if draw(st.booleans()):
                p["callbacks"] = [{"event": "taskStarts", "commands": [draw(TEXT)]}]  # open schema: kept
            prereqs.append(p)
            refs.setdefault(kind, []).append(n)
    names = draw(st.lists(IDENT, min_size=1, max_size=3, unique=True))
    roles: dict[str, Any] = {}
    for name in names:
        n = draw(st.integers(1, 3))
        memory = draw(st.integers(100, 8192))
        role: dict[str, Any] = {
            "dockerImage": draw(st.sampled_from(images)),
            "resourcePerInstance": {"cpu": draw(st.integers(1, 8)), "memoryMB": memory, "gpu": draw(st.integers(0, 2))},
            "commands": draw(st.lists(COMMAND, min_size=1, max_size=3)),
        }
        if draw(st.booleans()):
            role["protocolVersion"] = draw(st.sampled_from([2, "2"]))
        if n > 1 or draw(st.booleans()):
            role["instances"] = n
        if draw(st.booleans()):
            counts = st.one_of(st.none(), st.integers(-1, n))
            role["completion"] = {
                k: draw(counts) for k in ("minFailedInstances", "minSucceededInstances") if draw(st.booleans())
            }
        if draw(st.booleans()):
            role["taskRetryCount"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            role["resourcePerInstance"]["ports"] = draw(
                st.dictionaries(IDENT, st.integers(1, 4), min_size=1, max_size=3)
            )
        if draw(st.booleans()):
            opts: dict[str, Any] = {"shmMB": draw(st.integers(0, memory))}
            if draw(st.booleans()):
                opts["infiniband"] = draw(st.booleans())
            if draw(st.booleans()):
                opts["privileged"] = draw(st.booleans())  # unknown options pass through OpenPAI's schema
            role["extraContainerOptions"] = opts
        for kind, declared in refs.items():
            if draw(st.booleans()):
                role[kind] = draw(st.sampled_from(declared))
        if draw(st.booleans()):
            role["prerequisites"] = draw(st.lists(st.sampled_from([p["name"] for p in prereqs]), max_size=2))
        roles[name] = role
    doc: dict[str, Any] = {"protocolVersion": draw(st.sampled_from([2, "2"])), "name": draw(NAMES), "type": "job"}
    _base(draw, doc, numbers=numbers)
    doc.pop("protocolVersion", None)
    doc["protocolVersion"] = 2
    doc.update(prerequisites=prereqs, taskRoles=roles)
    if draw(st.booleans()):
        doc["parameters"] = draw(st.dictionaries(IDENT, st.one_of(TEXT, st.integers()), max_size=3))
    if draw(st.booleans()):
        doc["secrets"] = draw(st.dictionaries(IDENT, TEXT, max_size=2))
    if draw(st.booleans()):
        doc["jobRetryCount"] = draw(st.integers(0, 3))
    deployments = []
    for dname in draw(st.lists(NAMES, max_size=2, unique=True)):
        commands = st.lists(TEXT, min_size=1, max_size=2)
        dep_roles = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        deployments.append(
            _base(
                draw,
                {
                    "name": dname,
                    "taskRoles": {
                        r: {k: draw(commands) for k in ("preCommands", "postCommands") if draw(st.booleans())}
                        for r in dep_roles
                    },
                },
                numbers=numbers,
            )
        )
    if deployments:
        doc["deployments"] = deployments
    defaults: dict[str, Any] = {}
    if deployments and draw(st.booleans()):
        defaults["deployment"] = draw(st.sampled_from([d["name"] for d in deployments]))
    if draw(st.booleans()):
        defaults["virtualCluster"] = draw(IDENT)
    if defaults:
        doc["defaults"] = defaults
    if draw(st.booleans()):
        doc["extras"] = {"gangAllocation": draw(st.booleans()), "submitFrom": draw(TEXT)}
    return doc


def _writes_valid(job: Job) -> None:
    written = job.to_v2()
    assert server_problems(written) == [], written
    assert official_problems(written) == [], written


@settings(max_examples=examples(300), **SETTINGS)
@given(openpai_docs())
def test_what_openpai_accepts_we_accept(doc: dict[str, Any]) -> None:
    assert server_problems(doc) == []  # the generator's own check
    job = job_from_document(copy.deepcopy(doc))
    assert job_from_document(job.to_v2()) == job


@settings(max_examples=examples(200), **SETTINGS)
@given(openpai_docs(numbers=False))
def test_what_we_write_openpai_accepts(doc: dict[str, Any]) -> None:
    job = job_from_document(doc)
    _writes_valid(job)
    _writes_valid(Job.from_text(rename_text(json.dumps(doc), "a_clone")))  # a clone, too


@settings(max_examples=examples(200), **SETTINGS)
@given(v1_docs())
def test_v1_jobs_written_as_v2_are_valid_openpai_documents(doc: dict[str, Any]) -> None:
    _writes_valid(Job.from_text(json.dumps(doc)))


ODD_VALUES = [None, -1, 0, 2, -2, "", "x", "a.b", [], [1], ["x"], {}, {"a": 1}, {"x": "y"}, 1.5, True]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_docs(draw: st.DrawFn) -> dict[str, Any]:
    """An accepted document with one change: a value replaced, a key removed, or an unknown key added."""
    doc = draw(openpai_docs())
    path = draw(st.sampled_from(_paths(doc)))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    action = draw(st.sampled_from(["replace", "remove", "add"]))
    if action == "replace":
        parent[path[-1]] = draw(st.sampled_from(ODD_VALUES))
    elif action == "remove":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.sampled_from(["bogus", "x-y", "uri", "auth", "plugin", "name", "commands"]))] = draw(
            st.sampled_from(ODD_VALUES)
        )
    return doc


@settings(max_examples=examples(500), **SETTINGS)
@given(mutated_docs())
def test_what_openpai_refuses_we_refuse(doc: dict[str, Any]) -> None:
    refused = server_problems(doc)
    if not refused:
        return
    note(f"{doc!r} refused by OpenPAI: {refused}")
    with pytest.raises(JobValidationError) as info:
        job_from_document(doc)
    assert all(p.message for p in info.value.problems)


@pytest.mark.parametrize("path", sorted(p.name for p in EXAMPLES.iterdir()), ids=str)
def test_example_jobs_write_valid_openpai_documents(path: str) -> None:
    """tensorflow-cifar10.json gave postCommands: [] (minItems 1): a real OpenPAI answered 400."""
    _writes_valid(Job.from_file(EXAMPLES / path))


def test_documents_openpai_accepts_that_we_used_to_refuse() -> None:
    image = {"name": "img", "type": "dockerimage", "uri": "python:3.11", "protocolVersion": 2, "version": "1.0"}
    role = {
        "dockerImage": "img",
        "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0},
        "commands": ["x"],
        "completion": {"minSucceededInstances": -1, "minFailedInstances": -1},
        "protocolVersion": "2",
    }
    doc = {"protocolVersion": 2, "name": "j", "type": "job", "prerequisites": [image], "taskRoles": {"w": role}}
    assert server_problems(doc) == []
    job = job_from_document(doc)
    assert (job.task_roles[0].min_failed, job.task_roles[0].min_succeeded) == (None, None)
    assert job.to_v2()["taskRoles"]["w"]["completion"] == {"minFailedInstances": -1}


def test_the_forms_export_is_a_valid_openpai_document_once_converted() -> None:
    from pai_jupyter.notebook import JobForm

    form = JobForm()
    form.name.value = "exported"
    _writes_valid(Job.from_text(form.export()))


def test_wide_documents_are_refused_by_entry_count_before_they_are_built() -> None:
    """A 100,000-key YAML document once held the daemon 0.85 s before it was refused; it is refused by count."""
    from pai_jupyter.protocol.parse import MAX_ENTRIES

    role = {"name": "m", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "x"}
    head = f"jobName: wide\nimage: x\ntaskRoles: [{json.dumps(role)}]\nextras:\n"
    wide_yaml = head + "".join(f"  k{i}: {i}\n" for i in range(100_000))
    flow = head + "  list: [" + ",".join("1" for _ in range(MAX_ENTRIES + 1)) + "]\n"
    wide_json = json.dumps(
        {"jobName": "wide", "image": "x", "taskRoles": [role], "extras": {f"k{i}": i for i in range(MAX_ENTRIES + 1)}}
    )
    for text in (wide_yaml, flow, wide_json):
        with pytest.raises(JobValidationError) as info:
            Job.from_text(text)
        assert f"more than {MAX_ENTRIES} entries" in str(info.value)
    ok = head + "".join(f"  k{i}: {i}\n" for i in range(MAX_ENTRIES))  # at the limit: fine
    assert len(Job.from_text(ok).extras) == MAX_ENTRIES


RICH = {
    "protocolVersion": 2,
    "name": "rich",
    "type": "job",
    "version": "1",
    "contributor": "c",
    "description": "d",
    "prerequisites": [
        {"name": "img", "type": "dockerimage", "uri": "python:3.11", "auth": {"username": "u", "password": "p"}},
        {"name": "d", "type": "data", "uri": ["hdfs://a"], "plugin": "p", "require": ["x"]},
        {"name": "s", "type": "script", "uri": "git://s"},
        {"name": "o", "type": "output", "uri": "/out"},
    ],
    "parameters": {"lr": 1},
    "secrets": {"k": "v"},
    "jobRetryCount": 1,
    "taskRoles": {
        "w": {
            "protocolVersion": 2,
            "instances": 2,
            "completion": {"minFailedInstances": 1, "minSucceededInstances": 2},
            "taskRetryCount": 0,
            "prerequisites": ["d"],
            "dockerImage": "img",
            "data": "d",
            "output": "o",
            "script": "s",
            "extraContainerOptions": {"shmMB": 64, "infiniband": False},
            "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0, "ports": {"http": 1}},
            "commands": ["x"],
        }
    },
    "deployments": [{"name": "dep", "taskRoles": {"w": {"preCommands": ["a"], "postCommands": ["b"]}}}],
    "defaults": {"deployment": "dep", "virtualCluster": "default"},
    "extras": {"gangAllocation": True},
}


def _one_change_documents() -> list[tuple[str, dict[str, Any]]]:
    """RICH with one value replaced by each odd value, or one key removed: every path, every value."""
    out = []
    for path in _paths(RICH):
        for value in [*ODD_VALUES, "remove"]:
            doc = copy.deepcopy(RICH)
            parent = doc
            for part in path[:-1]:
                parent = parent[part]
            if value == "remove":
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(value)
            out.append((f"{'.'.join(map(str, path))}={value!r}", doc))
    return out


def test_every_single_change_openpai_refuses_we_refuse() -> None:
    """A deterministic sweep beside the random one: an explicit null where OpenPAI types a field without null
    (a role's data, a dockerimage's auth) was once read as "not given" and accepted."""
    assert server_problems(RICH) == [] and job_from_document(copy.deepcopy(RICH)).name == "rich"
    accepted = []
    for change, doc in _one_change_documents():
        if server_problems(doc):
            try:
                job_from_document(doc)
            except JobValidationError:
                continue
            accepted.append(change)
    assert accepted == []
