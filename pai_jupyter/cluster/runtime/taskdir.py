"""The task directory, a file protocol between a task's shim, its runtime, the services supervisor and the daemon:
every name in it, the format of each file and who may write it, here once (shim.c and shim.sh spell the same
names; a test checks).

On a shared machine the daemon and the C shim run as root and the task as its user's own account (or as root in
a container), so the directory is split by who writes (docs/security.md):

- The task directory itself is the CONTROL part: made and written by root (the runtime, or the shim from fds it
  opened before the command's privileges dropped), never writable by the task (``0750 root:<task gid>``, or the
  daemon's own account when it is not root). ``stdout``, ``stderr``, ``all`` (both, interleaved as they arrive),
  ``runtime`` (the runtime's own notices, OpenPAI's "runtime" log) and ``exit_code`` (the command's status,
  128+N for signal N, one short write once the logs are complete) by the C shim; ``command.sh`` (the script as
  it may be shown, secrets masked: the real one reaches the shell in memory), ``handle.json`` (the task's
  ``TaskHandle``, before the task can run, so a daemon killed mid-start finds it), ``cgroup`` (the
  ``cgroup.procs`` paths shim.sh joins), ``oom`` (the memory watchdog's verdict) and ``shim.sh`` (a container's
  copy) by the runtime; ``service-<name>.request`` (the daemon asks the supervisor to ``start`` or ``stop`` it;
  group-readable) and ``.stopped`` (its marker that a service was stopped on request, for a restarted daemon)
  by the daemon; ``exec.sock`` (0600, made by the C shim when the daemon first asks: how a shell is started
  inside the task, under the shim, as its account).
- ``run/`` and ``work/`` are the task's (its account owns them): ``run/service-<name>.log``, ``.pid`` and
  ``.missing`` (the service's reason it cannot run, e.g. no sshd) and whatever sockets its services make;
  ``work/`` is the default working directory. On Docker the container sees the control part read-only at
  ``IN_CONTAINER`` and ``run/`` writable below it, and its shim (shim.sh, in the container) writes its logs, exit
  status and ``oom_kills`` (its cgroup's count of OOM kills) into ``run/`` (``Runtime.logs_dir``): the
  container's words, read by the daemon like any file a task can write.

The daemon reads every file of a task directory through ``safeio`` (no symlink followed, regular files only,
bounded), so even a control file is read safely as a second line. An empty integer file reads as missing.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from ...common import safeio

IN_CONTAINER = "/pai/task"  # where a container sees its task directory (a bind mount)
OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")
"""Where a container's shim.sh reads its cgroup's count of OOM kills (cgroup v2, v1) into ``OOM_KILLS``."""
SCRIPT_ENV = "PAI_JUPYTER_COMMAND"  # how shim.sh receives the task's script (it unsets it before the command)
SERVICE_BIN = "PAI_SERVICE_BIN"  # process runtime: where the platform's own services (TensorBoard, Jupyter) are
SERVICE_HOST = '"${PAI_SERVICE_HOST:-127.0.0.1}"'
"""Where the platform's services in a task (TensorBoard, Jupyter, the desktop's websockify) listen, as the task's
shell says it: loopback for a task on this machine; its node's IP where a runtime's wrapper exports
PAI_SERVICE_HOST (Slurm: the proxy reaches the service on the task's node, with its token)."""

# written by the shim
STDOUT, STDERR, ALL = "stdout", "stderr", "all"
LOGS = (STDOUT, STDERR, ALL)
RUNTIME_LOG = "runtime"
PID = "pid"
EXIT_CODE = "exit_code"
EXIT_CODE_TMP = "exit_code.tmp"
OOM_KILLS = "oom_kills"  # shim.sh in a container: its cgroup's count of OOM kills, once the command is done
EXEC_SOCKET = "exec.sock"  # the C shim's: shells inside the task (shim.c, "A shell in the task")
# written by the runtime
COMMAND = "command.sh"
HANDLE = "handle.json"
CGROUP = "cgroup"
OOM = "oom"
SHIM_COPY = "shim.sh"
WORK = "work"
RUN = "run"  # the task's own: service logs, pids, sockets; on Docker also the shim's logs and exit status

STALE = frozenset((PID, EXIT_CODE, EXIT_CODE_TMP, OOM, CGROUP, HANDLE))
"""What an earlier start into the same directory left and a new start must not read as its own."""

SERVICE_KINDS = ("log", "pid", "request", "stopped", "missing")
TASK_WRITTEN_KINDS = frozenset(("log", "pid", "missing"))  # written by the task's supervisor: in ``run/``
SERVICE_ACTIONS = ("start", "stop")  # what a ``.request`` file holds (then a serial, so each request is new)
REQUEST_MODE = 0o640  # root's, readable by the task's group: the supervisor reads it, cannot change it


def service_file(service: str, kind: str) -> str:
    """``service-<name>.<kind>`` relative to the task directory (``run/...`` for what the task writes); ``kind``
    one of SERVICE_KINDS."""
    if kind not in SERVICE_KINDS:
        raise ValueError(f"no service file of kind {kind!r}")
    name = f"service-{service}.{kind}"
    return f"{RUN}/{name}" if kind in TASK_WRITTEN_KINDS else name


def service_request_glob() -> str:
    return "service-*.request"


def in_shell(name: str) -> str:
    """A file of the task's directory as the task's shell names it (double-quoted, through $PAI_TASK_DIR)."""
    return f'"$PAI_TASK_DIR/{name}"'


def read_int(path: Path) -> int | None:
    """An integer file written by a shim; missing, empty (killed mid-write) or unsafe (a symlink) reads as None."""
    text = safeio.read_text_beneath(path.parent, path.name, 64)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def exit_code(logs_dir: Path) -> int | None:
    """The exit status a shim wrote into ``logs_dir`` (the task directory, or its ``run/`` on Docker)."""
    return read_int(Path(logs_dir) / EXIT_CODE)


def oom_killed(logs_dir: Path) -> bool:
    """Whether the kernel killed a process of the task for memory, as a container's shim counted it."""
    return (read_int(Path(logs_dir) / OOM_KILLS) or 0) > 0


def clear_stale(task_dir: Path) -> None:
    """Remove what an earlier start left (``STALE``); one directory read, not an unlink per possible leftover."""
    for entry in os.scandir(task_dir):
        if entry.name in STALE:
            os.unlink(entry.path)


def write_handle(task_dir: Path, handle: dict[str, Any]) -> None:
    write_private(Path(task_dir) / HANDLE, json.dumps(handle))


def write_private(path: Path, text: str) -> None:
    """Root's own file in the control part: created 0600, never through a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def read_handle(task_dir: Path) -> dict[str, Any] | None:
    """``handle.json`` as written, or None when there is none (the task never started) or it is unreadable."""
    text = safeio.read_text_beneath(task_dir, HANDLE, 1 << 20)
    try:
        data = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def write_copy(task_dir: Path, name: str, text: str) -> None:
    """A file of the runtime's for the task to read (e.g. a container's ``shim.sh``), 0644, no symlink followed."""
    fd = os.open(Path(task_dir) / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    os.fchmod(fd, 0o644)  # whatever the daemon's umask (077): another account's task reads it
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def write_command(task_dir: Path, shown_script: str) -> None:
    write_private(Path(task_dir) / COMMAND, shown_script)


def add_notice(task_dir: Path, notice: str) -> None:
    """Append the runtime's own words to the task's ``runtime`` log (never through a symlink)."""
    fd = os.open(Path(task_dir) / RUNTIME_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(notice)


def record_start_failure(task_dir: Path, diagnostics: str) -> None:
    """A task that never started (no shim wrote its logs): its reason in the ``runtime`` log and in ``stderr`` and
    ``all``, so a log view shows why instead of nothing. Written only where no log exists yet."""
    Path(task_dir).mkdir(parents=True, exist_ok=True)
    line = f"the task did not start: {diagnostics}\n"
    add_notice(task_dir, line)
    for name in (STDERR, ALL):
        with contextlib.suppress(FileExistsError):
            fd = os.open(Path(task_dir) / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(line)


def write_request(task_dir: Path, service: str, action: str, serial: int, gid: int | None) -> None:
    """Ask the task's supervisor to ``start``/``stop`` a service: ``<action> <serial>`` in the control part,
    readable by the task's group (``gid``), replaced atomically (the supervisor acts once per new serial)."""
    final = Path(task_dir) / service_file(service, "request")
    tmp = final.with_name(final.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, REQUEST_MODE)
    try:
        if gid is not None:
            os.fchown(fd, -1, gid)
        os.fchmod(fd, REQUEST_MODE)
        os.write(fd, f"{action} {serial}\n".encode())
    finally:
        os.close(fd)
    os.replace(tmp, final)


def set_marker(task_dir: Path, service: str, on: bool) -> None:
    """The daemon's own ``.stopped`` marker of a service (in the control part: the task cannot forge it)."""
    path = Path(task_dir) / service_file(service, "stopped")
    if on:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def has_marker(task_dir: Path, service: str) -> bool:
    return has_file(task_dir, service_file(service, "stopped"))


def has_file(task_dir: Path, name: str) -> bool:
    """Is ``name`` a regular file of the task directory (a symlink or a FIFO there is not)?"""
    return safeio.is_file_beneath(task_dir, name)


# ---- who owns what (run_as: the (uid, gid) a task runs as when the daemon is root, else None) ------------------
def _set_owner(path: Path, uid: int, gid: int, mode: int) -> None:
    """chown + chmod through an fd opened without following a symlink (a planted link is refused, not followed)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.fchown(fd, uid, gid)
        if st.st_mode & 0o7777 != mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def share(path: Path, run_as: tuple[int, int] | None) -> None:
    """A control directory the task may enter and read but never write: the daemon's, ``0750`` with the task
    account's group (the task's own group: no other account is in it)."""
    if run_as is not None:
        _set_owner(path, os.geteuid(), run_as[1], 0o750)


def give(path: Path, run_as: tuple[int, int] | None) -> None:
    """A directory (or file) of the task's own, private to its account (``0700``)."""
    if run_as is not None:
        _set_owner(path, run_as[0], run_as[1], 0o700)


def make_task_parts(task_dir: Path, run_as: tuple[int, int] | None, work: bool = True) -> None:
    """The task-writable parts of a control directory made by root: ``run/`` (and ``work/``), the account's."""
    for name in (RUN, WORK) if work else (RUN,):
        part = Path(task_dir) / name
        part.mkdir(mode=0o700, exist_ok=True)
        give(part, run_as)
