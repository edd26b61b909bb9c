"""The task directory, a file protocol between a task's shim, its runtime, the services supervisor and the daemon:
every name in it and the format of each file, here once (shim.c and shim.sh spell the same names; a test checks).

Written by the shim (``shim.c``, ``shim.sh``): ``stdout``, ``stderr`` and ``all`` (both, interleaved as they
arrive), ``runtime`` (the runtime's own notices, OpenPAI's "runtime" log), ``pid`` (shim.sh: its pid, a hint) and
``exit_code`` (the command's status, 128+N for signal N, one short write once the logs are complete; shim.sh
goes through ``exit_code.tmp``). An empty integer file reads as missing. The C shim also listens on
``exec.sock`` while the task runs (0600, the daemon's only): the daemon's way to start a shell inside the task.

Written by the runtime: ``command.sh`` (the script as it may be shown, secrets masked: the real one reaches the
shell in memory), ``handle.json`` (the task's ``TaskHandle``, before the task can run, so a daemon killed mid-start
finds it), ``cgroup`` (the ``cgroup.procs`` paths shim.sh joins, one a line), ``oom`` (the memory watchdog's
verdict), ``shim.sh`` (a container's copy of the shim) and ``work/`` (the default working directory).

Services (``cluster/task/services.py``): ``service-<name>.log`` and ``.pid`` (the supervisor's), ``.request`` (the
daemon asks the supervisor to ``start`` or ``stop`` it), ``.stopped`` (the daemon's marker that it was stopped on
request, kept on disk for a restarted daemon) and ``.missing`` (the service's reason it cannot run, e.g. no sshd).

A container sees the directory at ``IN_CONTAINER``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

IN_CONTAINER = "/pai/task"  # where a container sees its task directory (a bind mount)
SCRIPT_ENV = "PAI_JUPYTER_COMMAND"  # how shim.sh receives the task's script (it unsets it before the command)

# written by the shim
STDOUT, STDERR, ALL = "stdout", "stderr", "all"
LOGS = (STDOUT, STDERR, ALL)
RUNTIME_LOG = "runtime"
PID = "pid"
EXIT_CODE = "exit_code"
EXIT_CODE_TMP = "exit_code.tmp"
EXEC_SOCKET = "exec.sock"  # the C shim's: shells inside the task (shim.c, "A shell in the task")
# written by the runtime
COMMAND = "command.sh"
HANDLE = "handle.json"
CGROUP = "cgroup"
OOM = "oom"
SHIM_COPY = "shim.sh"
WORK = "work"

STALE = frozenset((PID, EXIT_CODE, EXIT_CODE_TMP, OOM, CGROUP, HANDLE))
"""What an earlier start into the same directory left and a new start must not read as its own."""

SERVICE_KINDS = ("log", "pid", "request", "stopped", "missing")
SERVICE_ACTIONS = ("start", "stop")  # what a ``.request`` file holds


def service_file(service: str, kind: str) -> str:
    """``service-<name>.<kind>``; ``kind`` one of SERVICE_KINDS."""
    if kind not in SERVICE_KINDS:
        raise ValueError(f"no service file of kind {kind!r}")
    return f"service-{service}.{kind}"


def service_request_glob() -> str:
    return "service-*.request"


def in_shell(name: str) -> str:
    """A file of the task's directory as the task's shell names it (double-quoted, through $PAI_TASK_DIR)."""
    return f'"$PAI_TASK_DIR/{name}"'


def read_int(path: Path) -> int | None:
    """An integer file written by the shim; missing or empty (killed mid-write) reads as None."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def exit_code(task_dir: Path) -> int | None:
    return read_int(Path(task_dir) / EXIT_CODE)


def clear_stale(task_dir: Path) -> None:
    """Remove what an earlier start left (``STALE``); one directory read, not an unlink per possible leftover."""
    for entry in os.scandir(task_dir):
        if entry.name in STALE:
            os.unlink(entry.path)


def write_handle(task_dir: Path, handle: dict[str, Any]) -> None:
    (Path(task_dir) / HANDLE).write_text(json.dumps(handle))


def read_handle(task_dir: Path) -> dict[str, Any] | None:
    """``handle.json`` as written, or None when there is none (the task never started) or it is unreadable."""
    try:
        data = json.loads((Path(task_dir) / HANDLE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_command(task_dir: Path, shown_script: str) -> None:
    (Path(task_dir) / COMMAND).write_text(shown_script, encoding="utf-8")


def add_notice(task_dir: Path, notice: str) -> None:
    """Append the runtime's own words to the task's ``runtime`` log."""
    with open(Path(task_dir) / RUNTIME_LOG, "a", encoding="utf-8") as f:
        f.write(notice)
