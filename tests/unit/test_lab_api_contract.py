"""The Lab's interfaces for the server answers it reads (every interface of ``labextension/src/api.ts`` and of the
other modules in ``MODULES``) match the Python types that shape them (``pai_jupyter/server/answers.py``; mypy holds
the code that builds each answer to those): the same field names, each optional on both sides or on neither, and
of the same JSON types, null included (``str | None`` is ``string | null``; ``NotRequired[str]`` is ``?: string``,
not ``?: string | null``); nested objects, array items and record values included. An interface added to one of
those modules without a Python twin fails too. The modules are read with the TypeScript compiler API
(``labextension/scripts/apifields.mjs``); the Python side is each type's JSON Schema.

api.ts stays written by hand rather than generated from that schema: its interfaces carry the comments the Lab's
code is read with, and some are narrower than Python can say (``'yaml' | 'json'``); this test holds them to the
same shapes either way."""

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
        *(
            "ServiceLink",
            "ListedService",
            "TaskRow",
            "JobFields",
            "JobRow",
            "JobList",
            "TaskDetail",
            "JobDetail",
            "Problem",
            "PlacedProblem",
        ),
        "Validation",
        *("JobAccess", "MaxRunTime", "ProfileInfo", "ProfileList", "ProfileChoice", "SshTask", "SshInfo"),
        *("Resources", "Capacity", "JobNotification"),
    ),
    "formapi.ts": twins("FormImport"),
    "sweepsapi.ts": twins("BestTrial", "SweepRow", "TrialRow", "SweepDetail", "SweepsPage"),
    "queueplace.ts": twins("QueuedJob", "WaitingQueue"),
}
ANSWERS: dict[str, Any] = {name: tp for twins in MODULES.values() for name, tp in twins.items()}

Field = tuple[str, bool, tuple[str, ...]]  # (path such as "jobs[].tasks[].state", optional, its JSON kinds)
Fields = set[Field]
NUMBERS = {"integer": "number"}  # JSON Schema's two, TypeScript's one


def read_modules(modules: list[Path], names: list[str]) -> dict[str, Any]:
    """apifields.mjs's answer: ``{"declared": {module: [interface]}, "fields": {interface: [[path, optional,
    kinds]]}}``."""
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
    return {
        name: {(path, optional, tuple(kinds)) for path, optional, kinds in fields} for name, fields in found.items()
    }


def sources() -> list[Path]:
    return [LAB / "src" / module for module in MODULES]


def json_kind(value: Any) -> str:
    """A constant's JSON type (a Literal's values)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, (int, float)) else "string" if isinstance(value, str) else "object"


def python_fields(tp: Any) -> Fields:
    schema = TypeAdapter(tp).json_schema()
    defs = schema.get("$defs", {})
    out: Fields = set()

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def kinds(node: dict[str, Any]) -> tuple[str, ...]:
        found: set[str] = set()

        def add(n: dict[str, Any]) -> None:
            n = resolve(n)
            branches = n.get("anyOf") or n.get("oneOf") or n.get("allOf")
            if branches:
                for b in branches:
                    add(b)
            elif "type" in n:
                found.update(NUMBERS.get(t, t) for t in (n["type"] if isinstance(n["type"], list) else [n["type"]]))
            elif "const" in n or "enum" in n:
                found.update(json_kind(v) for v in n.get("enum", [n.get("const")]))
            else:  # Any
                found.add("unknown")

        add(node)
        return tuple(sorted(found))

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, prop in node.get("properties", {}).items():
            out.add((prefix + name, name not in node.get("required", []), kinds(prop)))
            follow(prop, prefix + name)

    def follow(node: dict[str, Any], path: str) -> None:
        node = resolve(node)
        for branch in node.get("anyOf", []):
            follow(branch, path)
        if node.get("type") == "array":
            out.add((path + "[]", False, kinds(node.get("items", {}))))
            follow(node.get("items", {}), path + "[]")
        if node.get("type") == "object" and "properties" not in node:  # a record: dict[str, X]
            values = node.get("additionalProperties")
            values = values if isinstance(values, dict) else {}
            out.add((path + "{}", False, kinds(values)))
            follow(values, path + "{}")
        if "properties" in node:
            walk(node, path + ".")

    walk(schema, "")
    return out


def shown(field: Field) -> str:
    path, optional, kinds = field
    return f"{path}{'?' if optional else ''}: {' | '.join(kinds)}"


def differences(ts: Fields, py: Fields) -> list[str]:
    return [f"Lab only: {shown(f)}" for f in sorted(ts - py)] + [f"Python only: {shown(f)}" for f in sorted(py - ts)]


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
        "Lab only: jobs[].serviceMessage: null | string",
        "Python only: jobs[].servicesMessage: null | string",
    ]
    changed.write_text(text.replace("  final: boolean;", "  final?: boolean;", 1))
    ts = ts_fields([changed], ["JobDetail"])["JobDetail"]
    assert differences(ts, python_fields(py.JobDetail)) == ["Lab only: final?: boolean", "Python only: final: boolean"]


def test_a_field_of_another_type_or_nullable_on_one_side_only_is_found(tmp_path: Path) -> None:
    """The same names, the same optionality, another JSON type: ``NotRequired[str]`` is not ``?: string | null``,
    ``str | None`` not ``string``, ``int`` not ``string``, a list of str not a list of numbers; and an interface the
    answers share (JobFields) is read through each one that extends it."""
    text = (LAB / "src" / "api.ts").read_text()
    changed = tmp_path / "api.ts"
    swaps = [
        ("  tensorboardPage?: string;", "  tensorboardPage?: string | null;"),
        ("  waitingReason: string | null;", "  waitingReason: string;"),
        ("  retries: number;\n  totalTaskNumber", "  retries: string;\n  totalTaskNumber"),  # JobFields's
        ("  states: string[];", "  states: number[];"),
    ]
    for old, new in swaps:
        assert old in text, old
        text = text.replace(old, new, 1)
    changed.write_text(text)
    ts = ts_fields([changed], ["JobDetail", "JobRow", "JobNotification"])
    assert differences(ts["JobDetail"], python_fields(py.JobDetail)) == [
        "Lab only: retries: string",
        "Lab only: tasks[].tensorboardPage?: null | string",
        "Lab only: waitingReason: string",
        "Python only: retries: number",
        "Python only: tasks[].tensorboardPage?: string",
        "Python only: waitingReason: null | string",
    ]
    assert differences(ts["JobRow"], python_fields(py.JobRow)) == [
        "Lab only: retries: string",
        "Python only: retries: number",
    ]
    assert differences(ts["JobNotification"], python_fields(py.JobNotification)) == [
        "Lab only: states[]: number",
        "Python only: states[]: string",
    ]


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
    assert differences(ts["SweepDetail"], python_fields(py.SweepDetail)) == ["Lab only: eta: number"]
    assert differences(ts["WaitingQueue"], python_fields(py.WaitingQueue)) == [
        "Lab only: virtualClusters{}[].ahead?: number",
        "Lab only: virtualClusters{}[].vc: string",
        "Python only: virtualClusters{}[].ahead: number",
    ]
    (tmp_path / "queueplace.ts").write_text(queue + "\nexport interface QueueStats {\n  jobs: number;\n}\n")
    modules[2:] = [tmp_path / "queueplace.ts", LAB / "src" / "formapi.ts"]
    assert unmatched(read_modules(modules, [])["declared"]) == ["no Python twin: queueplace.ts QueueStats"]
