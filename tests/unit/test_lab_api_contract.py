"""labextension/src/api.ts's interfaces for the server answers the Lab reads match the Python types that shape them
(``pai_jupyter/server/answers.py``; mypy holds the code that builds each answer to those): the same field names,
each optional on both sides or on neither, nested objects and array items included. api.ts is read with the
TypeScript compiler API (``labextension/scripts/apifields.mjs``); the Python side is each type's JSON Schema."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from pai_jupyter.server.answers import JobDetail, JobList

LAB = Path(__file__).resolve().parents[2] / "labextension"
ANSWERS: dict[str, Any] = {"JobList": JobList, "JobDetail": JobDetail}  # api.ts interface -> its Python type

Fields = set[tuple[str, bool]]  # (path such as "jobs[].tasks[].state", optional)


def ts_fields(api_ts: Path, names: list[str]) -> dict[str, Fields]:
    if shutil.which("node") is None or not (LAB / "node_modules" / "typescript").is_dir():
        pytest.skip("needs node and labextension/node_modules (make install)")
    out = subprocess.run(
        ["node", str(LAB / "scripts" / "apifields.mjs"), str(api_ts), *names],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return {name: {(path, optional) for path, optional in fields} for name, fields in json.loads(out).items()}


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
        if "properties" in node:
            walk(node, path + ".")

    walk(schema, "")
    return out


def differences(ts: Fields, py: Fields) -> list[str]:
    return [f"api.ts only: {p}{'?' if o else ''}" for p, o in sorted(ts - py)] + [
        f"Python only: {p}{'?' if o else ''}" for p, o in sorted(py - ts)
    ]


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_api_ts_declares_each_answer_as_python_shapes_it(name: str) -> None:
    ts = ts_fields(LAB / "src" / "api.ts", [name])[name]
    assert not differences(ts, python_fields(ANSWERS[name])), "\n".join(differences(ts, python_fields(ANSWERS[name])))


def test_a_field_renamed_or_made_optional_on_one_side_is_found(tmp_path: Path) -> None:
    text = (LAB / "src" / "api.ts").read_text()
    changed = tmp_path / "api.ts"
    changed.write_text(text.replace("servicesMessage: string | null;", "serviceMessage: string | null;", 1))
    ts = ts_fields(changed, ["JobList"])["JobList"]
    assert differences(ts, python_fields(JobList)) == [
        "api.ts only: jobs[].serviceMessage",
        "Python only: jobs[].servicesMessage",
    ]
    changed.write_text(text.replace("  final: boolean;", "  final?: boolean;", 1))
    ts = ts_fields(changed, ["JobDetail"])["JobDetail"]
    assert differences(ts, python_fields(JobDetail)) == ["api.ts only: final?", "Python only: final"]
