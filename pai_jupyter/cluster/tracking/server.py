"""The cluster's own MLflow tracking server: started by the daemon when tracking is on, on
SQLite and an artifact root in the cluster's home (``local/mlflow/``), with MLflow's basic-auth app so that one user's
runs are refused to another (``tracker.py`` makes the accounts and grants).

It listens on loopback only (where tasks run on other hosts, Slurm's nodes: at this host's address on the route to
them instead, ``Runtime.listen_addresses``, never every interface), at a port kept in ``local/mlflow-server.json``
and picked outside this host's ephemeral ports (``localserver.lasting_port``); it outlives a daemon killed with -9 (its
own session), and a restarted daemon takes it over when the process recorded there still listens at that port, as
tasks keep logging meanwhile; one that exited is started again at that port, which no other program's bind to port
0 or outgoing connection can have taken meanwhile. A daemon that stops cleanly stops it.
Where the daemon is root, the server runs as an account of its own (``pai-_mlflow``: the home's data are that
account's, root's files never are), so a flaw in MLflow's handling of what users send is not root's.
"""

from __future__ import annotations

import configparser
import contextlib
import importlib.util
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from ...common.localserver import bindable, lasting_port, serves
from ..paths import write_private_json
from ..runtime.hostenv import TASK_TOOLS, service_bin, usable_by_others
from ..runtime.ports import Span
from ..runtime.proctree import stat

log = logging.getLogger("pai_jupyter.cluster")
DIR = "mlflow"
ADMIN = "pai-jupyter-admin"  # MLflow's admin account: its password is in root's mlflow-secrets.json (and auth.ini)
LOOPBACK = "127.0.0.1"
NICE = 10
SERVICE_USER = "_mlflow"  # the platform-side name of the server's own OS account (no platform user has a leading _)


def installed() -> str | None:
    """None when this Python can run an MLflow server with its auth app, else what to install."""
    for module, extra in (("mlflow", "mlflow"), ("flask_wtf", "Flask-WTF (mlflow[auth])")):
        if importlib.util.find_spec(module) is None:
            return f"pip install 'pai_jupyter[mlflow]' (this Python has no {extra})"
    return None


@dataclass(frozen=True)
class Admin:
    username: str
    password: str


class EmbeddedServer:
    """Starts, finds and stops the server of one cluster home (``local``); ``run_as``: (uid, gid) to run it as."""

    def __init__(
        self,
        local: Path,
        run_as: Callable[[], tuple[int, int] | None] = lambda: None,
        host: str = LOOPBACK,
        avoid: Span | None = None,
    ) -> None:
        self.local = local
        self.host = host  # loopback, or (tasks on other hosts) this host's address on the nodes' network
        self.avoid = avoid  # the task ports' range: never the server's port
        self.dir = local / DIR
        self.run_as = run_as
        self.url: str | None = None
        self.pid: int | None = None
        self.ticks: int | None = None  # the server process's start (kernel ticks): its pid alone may be another's
        self.child = False  # started by this process (one taken over from an earlier daemon is not its to reap)

    @property
    def record(self) -> Path:
        return self.local / "mlflow-server.json"

    def secrets(self) -> dict[str, str]:
        """Root's own file of the server's secrets (made once, 0600, beside the server's directory, never in it):
        the admin password, the Flask key and the key users' MLflow passwords are derived from (``tracker.py``)."""
        path = self.local / "mlflow-secrets.json"
        try:
            return dict(json.loads(path.read_text()))
        except FileNotFoundError:
            made = {name: secrets.token_urlsafe(32) for name in ("admin_password", "flask_key", "users_key")}
            write_private_json(path, made)
            return made

    def admin(self) -> Admin:
        return Admin(ADMIN, self.secrets()["admin_password"])

    def start(self) -> str:
        """The server's URL: the one still running from before (the daemon was restarted), else a new one, started
        in the background (the tracker waits for it to answer)."""
        found = self._running()
        if found is not None:
            self.url, self.pid, _ = found
            self.ticks, self.child = _ticks(self.pid), False
            log.info("MLflow tracking server at %s (pid %d, still running from before)", self.url, self.pid)
            return self.url
        python, owner = _python(self._prepare())
        port = self._port()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.dir),
            "LANG": "C.UTF-8",
            "MLFLOW_AUTH_CONFIG_PATH": str(self.dir / "auth.ini"),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": self.secrets()["flask_key"],
            # MLflow's background jobs (GenAI scorers, prompt optimisation: nothing the platform uses) start 7 more
            # processes, ~2.5 GB resident and ~25 s of CPU in their first seconds on a 2-core machine
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        }
        argv = [
            python,
            "-m",
            "mlflow",
            "server",
            "--app-name",
            "basic-auth",
            "--backend-store-uri",
            f"sqlite:///{self.dir / 'mlflow.db'}",
            "--artifacts-destination",
            str(self.dir / "artifacts"),
            "--host",
            self.host,
            "--port",
            str(port),
            "--workers",
            "1",
        ]
        log_fd = os.open(
            self.local / "mlflow-server.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600
        )
        with open(log_fd, "ab") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                env=env,
                start_new_session=True,
                user=owner[0] if owner else None,
                group=owner[1] if owner else None,
                extra_groups=[] if owner else None,
            )
        host = f"[{self.host}]" if ":" in self.host else self.host
        with contextlib.suppress(OSError):  # a lower CPU priority than the jobs' (set before it forks its workers):
            os.setpriority(os.PRIO_PROCESS, proc.pid, NICE)  # tasks go first, the queued updates catch up
        self.url, self.pid, self.child, self.ticks = f"http://{host}:{port}", proc.pid, True, _ticks(proc.pid)
        started = psutil.Process(proc.pid).create_time()
        record = {"url": self.url, "host": self.host, "pid": proc.pid, "port": port, "started": started}
        write_private_json(self.record, record)
        log.info(
            "MLflow tracking server starting at %s (pid %d; log %s)", self.url, proc.pid, "local/mlflow-server.log"
        )
        return self.url

    def _prepare(self) -> tuple[int, int] | None:
        """The server's directory and its auth.ini (written once, when the directory is new: root writes nothing
        in it after the server's account owns it); returns that account (None: the daemon's own)."""
        owner = self.run_as()
        if not self.dir.exists():
            os.mkdir(self.dir, 0o700)
            os.mkdir(self.dir / "artifacts", 0o700)
            parser = configparser.ConfigParser()
            parser["mlflow"] = {
                "default_permission": "NO_PERMISSIONS",  # a run is its owner's; grants are made per experiment
                "database_uri": f"sqlite:///{self.dir / 'auth.db'}",
                "admin_username": ADMIN,
                "admin_password": self.secrets()["admin_password"],
                "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
                # a password checked once is not hashed again (scrypt) for 10 minutes: 0.2-0.7 s a call without it
                "auth_cache_ttl_seconds": "600",
            }
            with open(
                os.open(self.dir / "auth.ini", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "w"
            ) as f:
                parser.write(f)
            if owner is not None:
                for path in (self.dir / "auth.ini", self.dir / "artifacts", self.dir):
                    os.chown(path, *owner, follow_symlinks=False)
        return owner

    def _port(self) -> int:
        """The port the server had before, when it is free (the tasks running have its URL), else a new one that
        lasts: outside this host's ephemeral ports (no other program's bind to port 0 or outgoing connection
        takes it while the server restarts) and the task ports."""
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            port = int(json.loads(self.record.read_text())["port"])
            if bindable(self.host, port):
                return port
            log.warning("the MLflow server's port %d is taken: it moves (tasks running now keep the old address)", port)
        return lasting_port(self.host, avoid=self.avoid)

    def _running(self) -> tuple[str, int, float] | None:
        """(url, pid, start time) of the server recorded in server.json when that very process still listens at
        its port."""
        try:
            rec = json.loads(self.record.read_text())
            proc = psutil.Process(int(rec["pid"]))
            if not _same(proc, float(rec["started"])):
                return None
            if not _listens(proc, int(rec["port"])) or rec.get("host", LOOPBACK) != self.host:
                return None
            return str(rec["url"]), int(rec["pid"]), float(rec["started"])
        except (OSError, ValueError, KeyError, TypeError, psutil.Error):
            return None

    def alive(self) -> bool:
        """Is the server still running: that very process (a server taken over from an earlier daemon is not this
        one's child, and once it exited the kernel may give its pid to another process within seconds)? Known by
        its kernel start ticks: a create_time moves when the clock is stepped, and a live server would look gone."""
        st = stat(self.pid) if self.pid is not None else None
        return st is not None and st[0] != "Z" and st[1] == self.ticks

    def reap(self) -> None:
        """Collect the exit of a server this process started. Never one taken over from an earlier daemon: its pid
        may since be one of this process's own children (a task's), whose exit is not the server's to take."""
        if self.pid is not None and self.child:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, os.WNOHANG)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (its whole process group) and forget it. A taken-over server that exited is not
        signalled: its pid may be another process's by now (a child's is not, until it is reaped)."""
        if self.pid is None:
            return
        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.alive() and time.monotonic() < deadline:
                self.reap()
                time.sleep(0.05)
        if self.alive() or self.child:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        self.reap()
        self.record.unlink(missing_ok=True)
        self.pid = self.url = self.ticks = None


def _python(owner: tuple[int, int] | None) -> tuple[str, tuple[int, int] | None]:
    """The Python to run the server with, and the account to run it as: where the daemon is root, one with MLflow
    that the server's own account can run (the task tools, ``PAI_JUPYTER_TASK_TOOLS``, or the workbench's); only
    without one does the server run as root (said in the log)."""
    if owner is None:
        return sys.executable, None
    for bin_dir in (service_bin(), os.path.dirname(sys.executable)):
        python = os.path.join(bin_dir, "python3")
        if usable_by_others(python) and os.path.exists(os.path.join(bin_dir, "mlflow")):
            return python, owner
    log.warning(
        "the MLflow server runs as root: no Python with mlflow that another account can run (set %s to a "
        "virtualenv every account can use, with pai_jupyter[mlflow] in it)",
        TASK_TOOLS,
    )
    return sys.executable, None


def _ticks(pid: int) -> int | None:
    st = stat(pid)
    return st[1] if st else None


def _same(proc: psutil.Process, started: float) -> bool:
    """Is ``proc`` the process that started at ``started`` (not a later one given the same pid)?"""
    return abs(proc.create_time() - started) <= 0.01


def _listens(proc: psutil.Process, port: int) -> bool:
    """Does ``proc`` or a process it started listen on ``port`` (MLflow serves from a uvicorn child)?"""
    return any(serves(p.pid, port) for p in [proc, *proc.children(recursive=True)])
