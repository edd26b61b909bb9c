"""A module's servers, started and torn down in one place: daemons (daemon.start_daemon), ``jupyter server``
subprocesses (jupyter_fixture.start_jupyter) and a JupyterHub (``pai hub start``) in one temporary directory. Every
module-scoped fixture that runs a daemon beside a Jupyter server used to repeat the same try/finally; this is that
try/finally."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.runtime.hostenv import usable_by_others
from pai_jupyter.common.localserver import free_port
from tests.helpers.daemon import Api, kill_leftovers, start_daemon

from .jupyter_fixture import JupyterServer, start_jupyter, write_notebook

CHP_IN_CHECKOUT = Path(__file__).resolve().parents[2] / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
# the Python users' servers run with: jupyterhub, JupyterLab and this pai_jupyter, runnable by every account (.ci/run
# installs them into its task tools)
HUB_TOOLS = os.environ.get("PAI_TEST_HUB_TOOLS") or os.environ.get("PAI_TEST_TASK_TOOLS", "/opt/pai-task-tools")


def hub_or_skip() -> str:
    """The servers' Python, after skipping (saying what is missing) where a Hub cannot run users' servers here."""
    pytest.importorskip("jupyterhub", reason="the hub extra (make install) has jupyterhub")
    if os.geteuid() != 0:
        pytest.skip("users' servers run as their own accounts: the daemon must be root")
    if not CHP_IN_CHECKOUT.exists():
        pytest.skip("no configurable-http-proxy in hub/node_modules (make hub, or npm ci in hub/)")
    python = str(Path(HUB_TOOLS, "bin", "python3"))
    probe = "import jupyterhub.singleuser, jupyterlab, pai_jupyter.server"
    if not (os.path.exists(python) and usable_by_others(python)) or subprocess.run([python, "-c", probe]).returncode:
        pytest.skip(f"{python} cannot run a user's server (.ci/run installs jupyterhub, jupyterlab, pai_jupyter there)")
    return python


@dataclass
class HubServer:
    """JupyterHub + configurable-http-proxy as ``pai hub start`` runs them (shared-password sign-in, "dummy"),
    in front of the daemon of ``home``."""

    home: Path
    port: int
    python: str
    admin: str = "hubadmin"
    backend: str | None = None  # pai hub start --backend (the daemon already runs on it)
    clients: list[httpx.Client] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def folder(self) -> Path:
        return self.home / "hub"

    def pai(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PAI_JUPYTER_HOME": str(self.home)}
        cmd = [sys.executable, "-m", "pai_jupyter.cli", "hub", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    def start(self) -> None:
        args = ["--authenticator", "dummy", "--port", str(self.port), "--admin", self.admin]
        args += ["--backend", self.backend] if self.backend else []
        done = self.pai("start", *args, "--server-python", self.python, "--proxy", str(CHP_IN_CHECKOUT))
        assert done.returncode == 0, done.stdout + done.stderr

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.pai("stop")

    def password(self, admin: bool = False) -> str:
        return (self.folder / ("admin-password" if admin else "dummy-password")).read_text().strip()

    def token(self, user: str) -> str:
        """A new API token of ``user`` (with all their scopes), made by the Hub's own command."""
        cmd = [sys.executable, "-m", "jupyterhub", "token", "-f", str(self.folder / "jupyterhub_config.py"), user]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=self.folder, timeout=120, check=True)
        return done.stdout.strip().splitlines()[-1]

    def api(self, token: str) -> httpx.Client:
        """A client of the Hub's REST API (``/hub/api``) with ``token``."""
        client = httpx.Client(base_url=self.url + "hub/api", headers={"Authorization": f"token {token}"}, timeout=60)
        self.clients.append(client)
        return client

    def log_text(self) -> str:
        return "\n".join(
            (self.folder / n).read_text(errors="replace")
            for n in ("hub.log", "proxy.log")
            if (self.folder / n).exists()
        )


class Servers:
    """What a fixture started under ``tmp``; the daemon home is ``tmp/home`` unless another is named."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.home = tmp, tmp / "home"
        self.homes: list[Path] = [self.home]  # stopped at the end even where a Jupyter server started the daemon
        self.jupyters: list[JupyterServer] = []
        self.hubs: list[HubServer] = []

    def daemon(self, home: Path | None = None, **kwargs: Any) -> Api:
        """A daemon in ``home`` (default ``self.home``), with start_daemon's keyword arguments."""
        home = home or self.home
        if home not in self.homes:
            self.homes.append(home)
        return start_daemon(home, **kwargs)

    def jupyter(self, *args: Any, name: str = "jupyter", home: Path | None = None, **kwargs: Any) -> JupyterServer:
        """A Jupyter server in ``tmp/name`` for the daemon in ``home`` (start_jupyter's other arguments)."""
        server = start_jupyter(self.tmp / name, home or self.home, *args, **kwargs)
        self.jupyters.append(server)
        return server

    def hub(self, home: Path | None = None, backend: str | None = None) -> HubServer:
        """JupyterHub in front of the daemon in ``home`` (default ``self.home``; start it first with ``daemon``), as
        ``pai hub start [--backend]`` runs it; skips where users' servers cannot run here (hub_or_skip)."""
        started = HubServer(home or self.home, free_port(), hub_or_skip(), backend=backend)
        self.hubs.append(started)
        started.start()
        return started

    def close(self) -> None:
        """Stop the Hubs and Jupyter servers, then each daemon, and kill whatever its tasks left behind."""
        for hub in self.hubs:
            hub.stop()
        for server in self.jupyters:
            server.stop()
        for home in self.homes:
            control.stop(home)
            kill_leftovers(home)


@contextlib.contextmanager
def servers(tmp: Path) -> Iterator[Servers]:
    """``Servers`` in ``tmp``, all stopped when the block ends (a fixture yields from inside the block)."""
    started = Servers(tmp)
    try:
        yield started
    finally:
        started.close()


@contextlib.contextmanager
def notebook_lab(tmp: Path, notebook: str, *cells: str, daemon: bool = True) -> Iterator[JupyterServer]:
    """The setup of a test that runs a notebook in a browser: a JupyterLab server (beside a daemon for the
    notebook's jobs, unless ``daemon`` is false) whose root holds ``notebook`` of these code cells."""
    with servers(tmp) as s:
        if daemon:
            s.daemon()
        server = s.jupyter(lab=True)
        write_notebook(tmp / "jupyter" / "root" / notebook, *cells)
        yield server
