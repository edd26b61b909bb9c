"""``pai validate FILE...``: the real console script in a subprocess, its output and exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.jobdocs import v1_doc, v1_role

JOBS = Path(__file__).resolve().parents[2] / "notebooks" / "jobs"


def pai_executable() -> str:
    here = Path(sys.executable).parent / "pai"
    found = str(here) if here.exists() else shutil.which("pai")
    if not found:
        pytest.fail("the pai console script is not installed (pip install -e .)")
    return found


def pai(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [pai_executable(), *args], input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd, env=env
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out: dict[str, str | bytes] = {
        "good.json": json.dumps(v1_doc(v1_role(taskNumber=2, cpuNumber=2, memoryMB=1024, gpuNumber=1)), indent=2),
        "bad.json": json.dumps(v1_doc(v1_role(memoryMB=50, shmMB=10), jobName="bad name")),
        "bad.yaml": "protocolVersion: 2\nname: x\ntype: job\nprerequisites: [{name: i, type: dockerimage, uri: a}]\n"
        "taskRoles:\n  1worker:\n    dockerImage: i\n"
        "    resourcePerInstance: {cpu: 1, memoryMB: 99, gpu: 0}\n    commands: [echo]\n",
        "good.yaml": "# a v2 job\nprotocolVersion: 2\nname: job1\ntype: job\n"
        "prerequisites:\n  - {name: img, type: dockerimage, uri: 'python:3.11'}\n"
        "taskRoles:\n  worker:\n    instances: 3\n    dockerImage: img\n"
        "    resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0, ports: {http: 1}}\n"
        "    commands: [echo hi]\n",
        "empty.yaml": "",
        "syntax.json": '{\n  "jobName": "x",\n  "image": "i",,\n}',
        "binary.json": b'{"jobName": "\xff"}',
    }
    paths = {}
    for name, content in out.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        paths[name] = path
    return paths


# Each run of the console script costs about a second here, so one run checks several files where it can.


def test_valid_files_print_ok_and_a_summary_and_exit_0(files: dict[str, Path]) -> None:
    res = pai("validate", str(files["good.json"]), str(files["good.yaml"]))
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.splitlines() == [
        f"{files['good.json']}: ok (v1)",
        "  job1: 1 role, 2 tasks, CPU 4, GPU 2, memory 2.0 GiB (image python:3.11)",
        "    main: 2 x (CPU 2, GPU 1, memory 1.0 GiB, shm 64 MB)",
        f"{files['good.yaml']}: ok (v2)",
        "  job1: 1 role, 3 tasks, CPU 3, GPU 0, memory 1.5 GiB (image python:3.11)",
        "    worker: 3 x (CPU 1, GPU 0, memory 512 MB, shm 64 MB, ports http x1)",
    ]
    assert res.stderr == ""


def test_invalid_files_list_every_problem_with_its_field_and_exit_2(files: dict[str, Path]) -> None:
    res = pai("validate", str(files["bad.json"]), str(files["good.json"]), str(files["bad.yaml"]))
    assert res.returncode == 2
    lines = res.stdout.splitlines()
    assert lines[:3] == [
        f"{files['bad.json']}: invalid",
        "  jobName: 'bad name': job names may use only letters, digits, '-', '.', '_' and '~'",
        "  taskRoles[0].memoryMB: 50 is below the minimum 100",
    ]
    assert lines[3] == f"{files['good.json']}: ok (v1)"  # a bad file does not stop the others
    start = lines.index(f"{files['bad.yaml']}: invalid")
    assert sorted(lines[start + 1 :]) == sorted(
        [
            "  taskRoles.1worker: role names must match ^[a-zA-Z_][a-zA-Z0-9_]*$ (start with a letter or '_', "
            "then letters, digits, '_')",
            "  taskRoles.1worker.resourcePerInstance.memoryMB: 99 is below the minimum 100",
        ]
    )
    assert "Traceback" not in res.stderr


def test_empty_and_unparsable_files_exit_2(files: dict[str, Path]) -> None:
    names = ["empty.yaml", "syntax.json", "binary.json"]
    res = pai("validate", *(str(files[n]) for n in names))
    assert res.returncode == 2
    assert res.stdout.splitlines() == [
        f"{files['empty.yaml']}: invalid",
        "  the document is empty",
        f"{files['syntax.json']}: invalid",
        "  JSON syntax error at line 3, column 16: Expecting property name enclosed in double quotes",
        f"{files['binary.json']}: invalid",
        "  the document is not valid UTF-8 (byte 13)",
    ]
    assert "Traceback" not in res.stderr


def test_a_directory_is_refused_with_exit_2(tmp_path: Path) -> None:
    res = pai("validate", str(tmp_path))
    assert res.returncode == 2
    assert "is a directory" in res.stderr and "Traceback" not in res.stderr


def test_missing_and_unreadable_files_exit_2(tmp_path: Path) -> None:
    locked = tmp_path / "locked.json"
    locked.write_text(json.dumps(v1_doc()))
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):  # root reads anything: a symlink loop cannot be read by anyone
            locked = tmp_path / "loop.json"
            locked.symlink_to(locked)
        res = pai("validate", str(tmp_path / "nope.json"), str(locked))
    finally:
        (tmp_path / "locked.json").chmod(0o600)
    assert res.returncode == 2
    lines = res.stdout.splitlines()
    assert lines[:2] == [f"{tmp_path / 'nope.json'}: invalid", "  cannot read the file: No such file or directory"]
    assert lines[2] == f"{locked}: invalid"
    assert lines[3].startswith("  cannot read the file: ") and len(lines) == 4
    assert "Traceback" not in res.stderr


def test_stdin_and_json_output(files: dict[str, Path]) -> None:
    res = pai("validate", "-", stdin=files["good.yaml"].read_text())
    assert res.returncode == 0
    assert res.stdout.splitlines()[0] == "-: ok (v2)"
    res = pai("validate", "-o", "json", str(files["good.json"]), str(files["bad.json"]))
    assert res.returncode == 2
    result = json.loads(res.stdout)
    assert result[0]["ok"] is True and result[0]["name"] == "job1" and result[0]["format"] == "v1"
    assert result[1]["ok"] is False
    assert {"path": "taskRoles[0].memoryMB", "message": "50 is below the minimum 100"} in result[1]["problems"]


def test_no_file_is_a_usage_error() -> None:
    res = pai("validate")
    assert res.returncode == 2
    assert "Missing argument" in res.stderr


def test_every_example_job_validates() -> None:
    examples = sorted(str(p) for p in JOBS.iterdir() if p.suffix in (".json", ".yaml", ".yml"))
    assert len(examples) >= 7
    res = pai("validate", *examples)
    assert res.returncode == 0, res.stdout + res.stderr
    oks = [line for line in res.stdout.splitlines() if not line.startswith(" ")]
    assert oks == [f"{p}: ok ({'v1' if p.endswith('.json') else 'v2'})" for p in examples]
