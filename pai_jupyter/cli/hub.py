"""``pai hub start|stop|status``: "the littlest GPU hub" — JupyterHub and its proxy in front of the embedded cluster,
each user's server a job of the cluster as that user (docs/hub.md). The files live in ``$PAI_JUPYTER_HOME/hub/``
(hubsetup.py); the Hub and the proxy run in the background with pid files, and stop with ``pai hub stop``; users'
servers are jobs, which keep running across a restart of the Hub and are found again by it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import httpx
import psutil

from ..cluster import control
from ..cluster.paths import pai_home
from . import hubsetup
from .group import PaiGroup

EXIT_UNAVAILABLE = 3
READY_SECONDS = 120.0


@click.group(cls=PaiGroup)
def hub() -> None:
    """Run JupyterHub in front of the embedded cluster: people sign in, pick resources, and get JupyterLab as a
    job of theirs."""


def _pid(path: Path) -> int | None:
    """The pid in ``path`` when that process is alive: not a zombie, which ``kill(pid, 0)`` still finds (a Hub
    killed where nothing reaps the orphans, a container's PID 1, would block every later start)."""
    try:
        pid = int(path.read_text().strip())
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except (OSError, ValueError, psutil.Error):
        return None
    return pid


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def _spawn(cmd: list[str], env: dict[str, str], log: Path, pid_file: Path | None, cwd: Path) -> subprocess.Popen[bytes]:
    with open(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, cwd=cwd, start_new_session=True
        )
    if pid_file is not None:
        hubsetup.write_private(pid_file, str(proc.pid))
    return proc


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


@hub.command()
@click.option("--port", type=int, default=8000, show_default=True, help="The port people open in their browser.")
@click.option("--ip", default="127.0.0.1", show_default=True, help="The address it listens on (0.0.0.0: every one).")
@click.option(
    "--authenticator",
    type=click.Choice(["pam", "dummy"]),
    default="pam",
    show_default=True,
    help="pam: the accounts of this machine (each person's tasks run as their own account); dummy: FOR TRYING "
    "ONLY, any name signs in with one shared password (printed), tasks run as pai-NAME accounts.",
)
@click.option("--admin", "admins", multiple=True, help="A Hub admin (also the workbench's admin); repeatable.")
@click.option("--server-python", help="The Python users' servers run with (default: $PAI_JUPYTER_TASK_TOOLS's).")
@click.option("--proxy", help="configurable-http-proxy to run (default: on PATH, else the checkout's).")
@click.option(
    "--backend",
    help="The cluster's runtime when this starts it (as pai cluster start --backend: slurm runs each server as a "
    "Slurm job on a node); default: the cluster's own choice.",
)
def start(
    port: int,
    ip: str,
    authenticator: str,
    admins: tuple[str, ...],
    server_python: str | None,
    proxy: str | None,
    backend: str | None,
) -> None:
    """Start the cluster (if it is not running), JupyterHub and its proxy in the background; returns once the
    Hub answers, and prints its URL."""
    home = pai_home()
    folder = hubsetup.hub_dir(home)
    hub_pid, proxy_pid = folder / "hub.pid", folder / "proxy.pid"
    if _pid(hub_pid) is not None:
        click.echo(f"pai hub is already running (pid {_pid(hub_pid)}); pai hub stop first to change its settings")
        return
    chp = hubsetup.find_proxy(proxy)
    try:
        info = control.start(home, runtime=backend or "auto")
    except control.DaemonError as exc:
        click.echo(f"pai hub: the cluster could not start: {exc}", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    runs = str(info.get("runtime", "")).split(" ")[0]
    if backend and runs != backend:
        click.echo(f"pai hub: the cluster runs on the {runs} runtime, not {backend}: pai cluster stop first", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    containers = runs.startswith("docker")
    python = "" if containers else hubsetup.server_python(server_python, os.geteuid() == 0)
    hub_ip = hubsetup.hub_address(info)
    last = hubsetup.saved_settings(home)
    if _pid(proxy_pid) is not None and (last.get("ip"), last.get("port")) != (ip, port):
        _stop(proxy_pid)  # the last start's proxy (the Hub died alone) on another address: a new one below
    chosen = hubsetup.settings(home, ip, port, authenticator, list(admins), python, hub_ip, _pid(proxy_pid) is not None)
    config, env = hubsetup.prepare(home, chosen)
    if _pid(proxy_pid) is None:
        proxy_cmd = [chp, "--ip", ip, "--port", str(port), "--api-ip", "127.0.0.1"]
        proxy_cmd += ["--api-port", str(chosen.proxy_api_port)]
        proxy_cmd += ["--error-target", f"{chosen.hub_url}/hub/error"]
        _spawn(proxy_cmd, env, folder / "proxy.log", proxy_pid, folder)
    proc = _spawn([sys.executable, "-m", "jupyterhub", "-f", str(config)], env, folder / "hub.log", None, folder)
    deadline = time.monotonic() + READY_SECONDS
    while not _answers(chosen.api_url):
        if proc.poll() is not None or time.monotonic() > deadline:
            click.echo(f"pai hub: JupyterHub did not start; its log ({folder / 'hub.log'}) ends:", err=True)
            click.echo(_tail(folder / "hub.log"), err=True)
            _stop(proxy_pid)
            sys.exit(EXIT_UNAVAILABLE)
        time.sleep(0.2)
    click.echo(f"JupyterHub at {chosen.url} (cluster at {info['url']}, authenticator {authenticator})")
    if hub_ip != "127.0.0.1":
        click.echo(
            f"  users' servers on the {runs} nodes reach the Hub at {chosen.hub_url}, the cluster at {info['nodesUrl']}"
        )
    if authenticator == "dummy":
        password = (folder / "dummy-password").read_text().strip()
        click.echo(f"FOR TRYING ONLY: sign in with any name and the password {password}")
        if admins:
            admin = (folder / "admin-password").read_text().strip()
            click.echo(f"  the admins ({', '.join(admins)}) sign in with the password {admin}")


def _stop(pid_file: Path, timeout: float = 15.0) -> bool:
    """TERM the process of ``pid_file`` and wait for it (KILL after ``timeout``); whether one was running."""
    pid = _pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid(pid_file) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    if _pid(pid_file) is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return True


@hub.command()
def stop() -> None:
    """Stop JupyterHub and its proxy. Users' servers are jobs: they keep running (until their max run time, or
    ``pai stop``), and the next ``pai hub start`` finds them again."""
    folder = hubsetup.hub_dir(pai_home())
    stopped = _stop(folder / "hub.pid")
    proxy = _stop(folder / "proxy.pid")
    click.echo("JupyterHub stopped" if stopped or proxy else "JupyterHub was not running")


@hub.command()
def status() -> None:
    """Whether JupyterHub, its proxy and the cluster run, and where."""
    home = pai_home()
    folder = hubsetup.hub_dir(home)
    saved = folder / "hub.json"
    if not saved.exists():
        click.echo("pai hub was never started here (pai hub start)", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    import json

    chosen = hubsetup.HubSettings(**json.loads(saved.read_text()))
    hub_pid, proxy_pid = _pid(folder / "hub.pid"), _pid(folder / "proxy.pid")
    cluster = control.running(home)
    click.echo(f"JupyterHub: {'running, pid ' + str(hub_pid) if hub_pid else 'stopped'} at {chosen.url}")
    click.echo(f"  proxy:    {'running, pid ' + str(proxy_pid) if proxy_pid else 'stopped'}")
    click.echo(f"  cluster:  {cluster['url'] if cluster else 'not running'}")
    click.echo(f"  sign-in:  {chosen.authenticator}{' (FOR TRYING ONLY)' if chosen.authenticator == 'dummy' else ''}")
    if not (hub_pid and proxy_pid and cluster):
        sys.exit(EXIT_UNAVAILABLE)
