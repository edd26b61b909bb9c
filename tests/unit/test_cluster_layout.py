"""The daemon package keeps one home per contract: SQL only in the store (core/store/), final states only in
common.states, task-directory names only in runtime/taskdir.py, and modules small enough to read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pai_jupyter.cluster
from tests.helpers.imports import own_imports

CLUSTER = Path(pai_jupyter.cluster.__file__).parent
STORE = CLUSTER / "core" / "store"  # the package
TASKDIR = CLUSTER / "runtime" / "taskdir.py"
# Cluster (core/service.py) hands its parts what they need (the shared state, a callable of the other part), so
# none of them imports the facade or the part it calls back, not even for a type
NOT_IMPORTED_BY = {
    "state": {"service", "launching", "ending"},
    "launching": {"service", "ending"},
    "ending": {"service", "launching"},
    "recovery": {"service", "launching"},
    "priority": {"service", "launching", "ending"},
}
SQL = re.compile(r"\b(SELECT\b.*\bFROM|INSERT (OR \w+ )?INTO|UPDATE \w+ SET|DELETE FROM|PRAGMA|BEGIN IMMEDIATE)\b")


def _modules() -> list[Path]:
    return sorted(CLUSTER.rglob("*.py"))


def _strings(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_sql_lives_only_in_the_store() -> None:
    offenders = {}
    for path in _modules():
        if path.is_relative_to(STORE):
            continue
        tree = ast.parse(path.read_text())
        sql = [s for s in _strings(tree) if SQL.search(s)]
        calls = [
            n.func.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("execute", "executemany", "executescript")
        ]
        raw = [
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and n.attr in ("one", "all", "db")
            and isinstance(n.value, ast.Attribute)
            and n.value.attr == "store"
        ]
        if sql or calls or raw:
            offenders[path.relative_to(CLUSTER).as_posix()] = sql + calls + raw
    assert offenders == {}


def test_no_copy_of_the_final_states() -> None:
    final = {"SUCCEEDED", "FAILED", "STOPPED"}
    offenders = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.Set, ast.List)):
                values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if final <= values:
                    offenders.append(f"{path.relative_to(CLUSTER)}:{node.lineno}")
    assert offenders == []


def test_log_names_are_spelled_only_by_the_task_directory_module() -> None:
    offenders = []
    for path in _modules():
        if path == TASKDIR:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Tuple) and {"stdout", "stderr", "all"} <= {
                e.value for e in node.elts if isinstance(e, ast.Constant)
            }:
                offenders.append(f"{path.relative_to(CLUSTER)}:{node.lineno}")
    assert offenders == []


def test_modules_stay_small() -> None:
    big = {p.relative_to(CLUSTER).as_posix(): n for p in _modules() if (n := len(p.read_text().splitlines())) > 400}
    assert big == {}


def test_the_parts_of_cluster_import_neither_the_facade_nor_each_other() -> None:
    core = "pai_jupyter.cluster.core."
    found = {}
    for part, banned in NOT_IMPORTED_BY.items():
        names = own_imports(CLUSTER / "core" / f"{part}.py")
        found[part] = {n.removeprefix(core).split(".")[0] for n in names if n.startswith(core)} & banned
    assert found == {part: set() for part in NOT_IMPORTED_BY}
