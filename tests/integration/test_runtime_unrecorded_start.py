"""A start whose handle cannot be written (a full disk) is undone by the runtime: the daemon starts the task again
once there is room (core/launching.py), so the first one must not run on beside it, unknown to the daemon. Before,
shim.sh's process, a Docker container and a Slurm job each ran on after the failed write. On every runtime, the
Slurm one on the real two-node cluster."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.cluster.core.space import for_want_of_space
from pai_jupyter.cluster.runtime import taskdir
from pai_jupyter.cluster.runtime.base import TaskStartError
from pai_jupyter.cluster.runtime.slurm.commands import FINAL
from tests.helpers.runtime import SLURM, make_runtime, make_spec
from tests.polling import wait_for


def _no_space(*_: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _left(kind: str, td: Path, name: str) -> str:
    """What of the task still runs, as the runtime's own tools show it ("" for nothing)."""
    if kind == "slurm":
        cmd = ["squeue", "-h", "-t", "all", "-n", f"pai-tester-{name}.a0.main.0.t0", "-o", "%A %T"]
        return " ".join(line for line in _out(cmd).splitlines() if line.split()[-1] not in FINAL)
    if kind.startswith("docker"):
        return _out(["docker", "ps", "-a", "--filter", f"name={name}", "--format", "{{.Names}} {{.Status}}"])
    return _out(["pgrep", "-af", str(td)])  # the shim's command line names its task directory


def _out(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("kind", ["process-c", "process-sh", "docker-bash", SLURM])
def test_a_start_whose_handle_cannot_be_written_leaves_nothing_running(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, extra = make_runtime(kind, tmp_path, request)
    name = f"unrecorded{secrets.token_hex(4)}"
    td = tmp_path / "t"
    td.mkdir()
    monkeypatch.setattr(taskdir, "write_handle", _no_space)
    spec = make_spec(td, "sleep 300", **{**extra, "key": f"tester~{name}.a0.main.0.t0", "job_name": name})
    try:
        with pytest.raises((TaskStartError, OSError)) as failed:
            rt.start(spec)
        assert for_want_of_space(failed.value)  # the daemon tries the start again: launching.py
        wait_for(
            lambda: not _left(kind, td, name),
            30,
            lambda: f"nothing of the failed start to run: {_left(kind, td, name)}",
        )
    finally:  # what a failing run left
        if kind == "slurm":
            _out(["scancel", "-n", f"pai-tester-{name}.a0.main.0.t0"])
        elif kind.startswith("docker"):
            for found in _out(["docker", "ps", "-aq", "--filter", f"name={name}"]).split():
                _out(["docker", "rm", "-f", found])
        else:  # (by pid: the shims of this test's own task directory)
            for pid in _out(["pgrep", "-f", str(td)]).split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
