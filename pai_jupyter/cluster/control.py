"""Start, find and stop the local daemon from another process (the CLI, the client's auto-start, tests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..common import channel, starter
from .paths import local_dir, make_private_dir, pai_home, read_runtime, runtime_file

EXIT_ANOTHER_DAEMON = 75  # the daemon's exit status when another one holds the home's lock (daemon.py)


class DaemonError(starter.StartError):
    pass


def _answers(info: dict[str, Any], timeout: float = 1.0) -> bool:
    """Does the daemon ``info`` describes answer (over its socket when it announces one: the token never crosses
    loopback TCP)?"""
    import httpx

    try:
        with channel.http_client(info, timeout=timeout) as http:
            r = http.get("/api/v2/info")
        return r.status_code == 200
    except (httpx.HTTPError, KeyError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(home: Path | None = None) -> dict[str, Any] | None:
    """runtime.json of a daemon that is up and answering, else None."""
    info = read_runtime(home)
    if info and _alive(int(info.get("pid", 0) or 0)) and _answers(info):
        return info
    return None


def start(
    home: Path | None = None,
    *,
    port: int = 0,
    runtime: str = "auto",
    cpus: int | None = None,
    memory_mb: int | None = None,
    gpus: int | None = None,
    stop_grace: float | None = None,
    timeout: float = 30.0,
    extra_args: list[str] | None = None,
) -> dict[str, Any]:
    """Start the daemon in the background and return its runtime.json once it answers (or the running one)."""
    home = home or pai_home()
    current = running(home)
    if current:
        return current
    local = local_dir(home)
    make_private_dir(home)
    make_private_dir(local)
    cmd = [
        sys.executable,
        "-m",
        "pai_jupyter.cluster.daemon",
        "--home",
        str(home),
        "--port",
        str(port),
        "--runtime",
        runtime,
    ]
    for flag, value in (("--cpus", cpus), ("--memory-mb", memory_mb), ("--gpus", gpus), ("--stop-grace", stop_grace)):
        if value is not None:
            cmd += [flag, str(value)]
    cmd += extra_args or []
    log_path = local / "daemon.log"
    env = dict(os.environ)  # (tasks never get it: a system PATH, see runtime/process.py)
    with open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, env=env, close_fds=True
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = read_runtime(home)
        if info and info.get("pid") == proc.pid and _answers(info, timeout=2.0):
            return info
        if proc.poll() == EXIT_ANOTHER_DAEMON:  # a racing start won: attach to its daemon once it answers
            winner = running(home)
            if winner:
                return winner
            time.sleep(0.05)
            continue
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace").splitlines()[-15:]
            raise DaemonError(f"the daemon exited with code {proc.returncode}:\n" + "\n".join(tail))
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    raise DaemonError(f"the daemon did not answer within {timeout:.0f} s; see {log_path}")


def stop(home: Path | None = None, *, timeout: float = 10.0) -> bool:
    """SIGTERM the daemon and wait for it to exit. Tasks keep running (re-attached at the next start)."""
    info = read_runtime(home)
    if not info or not _alive(int(info.get("pid", 0) or 0)):
        runtime_file(home).unlink(missing_ok=True)
        return False
    pid = int(info["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    runtime_file(home).unlink(missing_ok=True)
    return True


START_KEYS = ("runtime", "cpus", "memory_mb", "gpus")  # what an auto-start repeats of the last `pai cluster start`


def _choices_file(home: Path | None) -> Path:
    return local_dir(home or pai_home()) / "start.json"


def remember_start(home: Path | None, **choices: Any) -> None:
    """Record the user's ``pai cluster start`` flags (local/start.json): an auto-start starts the daemon the same
    way (not on the automatic runtime), and the cluster counts as not stopped by the user any more."""
    kept = {key: choices[key] for key in START_KEYS if choices.get(key) not in (None, "auto")}
    make_private_dir(local_dir(home or pai_home()))
    write_choices(home, {"stopped": False, "start": kept})


def remember_stop(home: Path | None) -> None:
    """Record that the user stopped the cluster (``pai cluster stop``): no client starts it behind their back."""
    choices = read_choices(home)
    if local_dir(home or pai_home()).is_dir():
        write_choices(home, {**choices, "stopped": True})


def read_choices(home: Path | None) -> dict[str, Any]:
    """local/start.json: ``{"stopped": bool, "start": {runtime, cpus, memory_mb, gpus}}`` ({} when absent)."""
    try:
        data = json.loads(_choices_file(home).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_choices(home: Path | None, choices: dict[str, Any]) -> None:
    path = _choices_file(home)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        json.dump(choices, out)


_start_daemon = start  # local_starter's keyword argument is named start, as the Starter protocol says


def local_starter(home: Path | None, *, start: bool) -> dict[str, Any] | None:
    """The ``local`` profile's starter (``common.starter``): the running daemon's runtime.json, else one started
    now when ``start`` (``start()`` keeps to one daemon per home: the daemon takes the home's lock), with the
    flags of the user's last ``pai cluster start``. A cluster the user stopped is not started again here."""
    info = running(home)
    if info is not None or not start:
        return info
    choices = read_choices(home)
    if choices.get("stopped"):
        raise starter.Stopped("it was stopped with `pai cluster stop`; start it again with: pai cluster start")
    kept = choices.get("start")
    kept = kept if isinstance(kept, dict) else {}
    return _start_daemon(home, **{key: kept[key] for key in START_KEYS if key in kept})


starter.register(starter.LOCAL, local_starter)
