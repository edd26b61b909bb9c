"""The Lab's interfaces for the server answers it reads (every interface of ``labextension/src/api.ts`` and of the
other modules in ``MODULES``) match the Python types that shape them (``pai_jupyter/server/answers.py``; mypy holds
the code that builds each answer to those): the same field names, each optional on both sides or on neither,
nested objects, array items and record values included; an interface added to one of those modules without a
Python twin fails too. The modules are read with the TypeScript compiler API (``labextension/scripts/apifields.mjs``);
the Python side is each type's JSON Schema."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from pai_jupyter.server import answers as py

LAB = Path(__file__).resolve().parents[2] / "labextension"


def twins(*names: str) -> dict[str, Any]:
    """Each interface's Python twin: the type of the same name in answers.py."""
    return {name: getattr(py, name) for name in names}


MODULES: dict[str, dict[str, Any]] = {  # a module of labextension/src -> each interface it declares -> its twin
    "api.ts": twins(
        *("TaskRow", "JobRow", "JobList", "TaskDetail", "JobDetail", "Problem", "PlacedProblem", "Validation"),
        *("JobAccess", "MaxRunTime", "ProfileInfo", "ProfileList", "ProfileChoice", "SshTask", "SshInfo"),
        *("Resources", "Capacity", "JobNotification"),
    ),
    "formapi.ts": twins("FormImport"),
    "sweepsapi.ts": twins("BestTrial", "SweepRow", "TrialRow", "SweepDetail", "SweepsPage"),
    "queueplace.ts": twins("QueuedJob", "WaitingQueue"),
}
ANSWERS: dict[str, Any] = {name: tp for twins in MODULES.values() for name, tp in twins.items()}

Fields = set[tuple[str, bool]]  # (path such as "jobs[].tasks[].state", optional)


def read_modules(modules: list[Path], names: list[str]) -> dict[str, Any]:
    """apifields.mjs's answer: ``{"declared": {module: [interface]}, "fields": {interface: [[path, optional]]}}``."""
    if shutil.which("node") is None or not (LAB / "node_modules" / "typescript").is_dir():
        pytest.skip("needs node and labextension/node_modules (make install)")
    out = subprocess.run(
        ["node", str(LAB / "scripts" / "apifields.mjs"), *map(str, modules), *names],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    answer: dict[str, Any] = json.loads(out)
    return answer


def ts_fields(modules: list[Path], names: list[str]) -> dict[str, Fields]:
    found = read_modules(modules, names)["fields"]
    return {name: {(path, optional) for path, optional in fields} for name, fields in found.items()}


def sources() -> list[Path]:
    return [LAB / "src" / module for module in MODULES]


def python_fields(tp: Any) -> Fields:
    schema = TypeAdapter(tp).json_schema()
    defs = schema.get("$defs", {})
    out: Fields = set()

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, prop in node.get("properties", {}).items():
            out.add((prefix + name, name not in node.get("required", [])))
            follow(prop, prefix + name)

    def follow(node: dict[str, Any], path: str) -> None:
        if "$ref" in node:
            follow(defs[node["$ref"].rsplit("/", 1)[-1]], path)
        for branch in node.get("anyOf", []):
            follow(branch, path)
        if node.get("type") == "array":
            follow(node.get("items", {}), path + "[]")
        if isinstance(node.get("additionalProperties"), dict):
            follow(node["additionalProperties"], path + "{}")
        if "properties" in node:
            walk(node, path + ".")

    walk(schema, "")
    return out


def differences(ts: Fields, py: Fields) -> list[str]:
    return [f"Lab only: {p}{'?' if o else ''}" for p, o in sorted(ts - py)] + [
        f"Python only: {p}{'?' if o else ''}" for p, o in sorted(py - ts)
    ]


@pytest.fixture(scope="module")
def lab_fields() -> dict[str, Fields]:
    return ts_fields(sources(), sorted(ANSWERS))  # one node for all of them


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_the_lab_declares_each_answer_as_python_shapes_it(name: str, lab_fields: dict[str, Fields]) -> None:
    found = differences(lab_fields[name], python_fields(ANSWERS[name]))
    assert not found, "\n".join(found)


def unmatched(declared: dict[str, list[str]]) -> list[str]:
    """Each interface a module declares with no Python twin in MODULES, and each twin no module declares."""
    found = {(Path(m).name, name) for m, names in declared.items() for name in names}
    listed = {(m, name) for m, twins in MODULES.items() for name in twins}
    return [f"no Python twin: {m} {n}" for m, n in sorted(found - listed)] + [
        f"not declared: {m} {n}" for m, n in sorted(listed - found)
    ]


def test_every_interface_of_the_answer_modules_has_a_python_twin() -> None:
    assert not unmatched(read_modules(sources(), [])["declared"])


def test_a_field_renamed_or_made_optional_on_one_side_is_found(tmp_path: Path) -> None:
    text = (LAB / "src" / "api.ts").read_text()
    changed = tmp_path / "api.ts"
    changed.write_text(text.replace("servicesMessage: string | null;", "serviceMessage: string | null;", 1))
    ts = ts_fields([changed], ["JobList"])["JobList"]
    assert differences(ts, python_fields(py.JobList)) == [
        "Lab only: jobs[].serviceMessage",
        "Python only: jobs[].servicesMessage",
    ]
    changed.write_text(text.replace("  final: boolean;", "  final?: boolean;", 1))
    ts = ts_fields([changed], ["JobDetail"])["JobDetail"]
    assert differences(ts, python_fields(py.JobDetail)) == ["Lab only: final?", "Python only: final"]


def test_a_field_added_on_one_side_is_found_in_an_extended_interface_and_a_record(tmp_path: Path) -> None:
    """A field only the Lab declares, in an interface another extends (SweepRow, read through SweepDetail) and in
    a record's values (the queue's lines); and an interface the Lab adds with no twin."""
    sweeps = (LAB / "src" / "sweepsapi.ts").read_text()
    queue = (LAB / "src" / "queueplace.ts").read_text()
    (tmp_path / "sweepsapi.ts").write_text(
        sweeps.replace("  submitted: number;", "  submitted: number;\n  eta: number;")
    )
    (tmp_path / "queueplace.ts").write_text(queue.replace("  ahead: number;", "  ahead?: number;\n  vc: string;"))
    modules = [LAB / "src" / "api.ts", tmp_path / "sweepsapi.ts", tmp_path / "queueplace.ts"]
    ts = ts_fields(modules, ["SweepDetail", "WaitingQueue"])
    assert differences(ts["SweepDetail"], python_fields(py.SweepDetail)) == ["Lab only: eta"]
    assert differences(ts["WaitingQueue"], python_fields(py.WaitingQueue)) == [
        "Lab only: virtualClusters{}[].ahead?",
        "Lab only: virtualClusters{}[].vc",
        "Python only: virtualClusters{}[].ahead",
    ]
    (tmp_path / "queueplace.ts").write_text(queue + "\nexport interface QueueStats {\n  jobs: number;\n}\n")
    modules[2:] = [tmp_path / "queueplace.ts", LAB / "src" / "formapi.ts"]
    assert unmatched(read_modules(modules, [])["declared"]) == ["no Python twin: queueplace.ts QueueStats"]
