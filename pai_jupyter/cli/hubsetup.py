"""What ``pai hub start`` prepares (docs/hub.md): the Hub's files under ``$PAI_JUPYTER_HOME/hub/`` (its secrets
0600), the daemon's link to it (``local/hub.yaml``), the ``jupyterhub_config.py`` it runs with, and the checks that
say what is missing before anything starts (the servers' Python, configurable-http-proxy)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ..cluster.paths import local_dir, make_private_dir
from ..cluster.runtime.hostenv import TASK_TOOLS, usable_by_others
from ..common.localserver import bindable, lasting_port

SERVICE = "pai"
PROXY = "configurable-http-proxy"
REPO_PROXY = Path(__file__).resolve().parents[2] / "hub" / "node_modules" / ".bin" / PROXY  # `make hub` puts it


@dataclass
class HubSettings:
    """What a start chose; kept in ``hub/hub.json`` so a restart keeps the Hub's internal ports (running servers
    know the Hub's API by its port)."""

    ip: str
    port: int
    hub_port: int
    proxy_api_port: int
    authenticator: str
    admins: list[str]
    server_python: str
    hub_ip: str = "127.0.0.1"  # where the Hub's own port listens: users' servers call its API there (hub_address)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.ip in ("", "0.0.0.0") else self.ip
        return f"http://{host}:{self.port}/"

    @property
    def hub_url(self) -> str:
        return f"http://{f'[{self.hub_ip}]' if ':' in self.hub_ip else self.hub_ip}:{self.hub_port}"

    @property
    def api_url(self) -> str:
        return f"{self.hub_url}/hub/api"


def hub_address(cluster: dict[str, Any]) -> str:
    """Where the Hub listens for users' servers (its API: OAuth, activity) and the proxy and the daemon call it:
    loopback while servers run on this host; this host's address on the nodes' network where the cluster's runtime
    runs them on other hosts (the daemon's ``nodesUrl``: the route to Slurm's nodes, daemon.listen_for_nodes), so
    a server on a node reaches it with nothing for the admin to set, and no other interface hears it."""
    nodes_url = cluster.get("nodesUrl")
    host = urlsplit(str(nodes_url)).hostname if nodes_url else None
    return host or "127.0.0.1"


def hub_dir(home: Path) -> Path:
    return home / "hub"


def private_file(path: Path, make: Any = None) -> str:
    """The file's stripped text, written first (0600) by ``make()`` when it does not exist."""
    if not path.exists() and make is not None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(str(make()))
    return path.read_text().strip()


def write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def saved_settings(home: Path) -> dict[str, Any]:
    """What the last start chose (``hub/hub.json``), or nothing."""
    with_file = hub_dir(home) / "hub.json"
    return dict(json.loads(with_file.read_text())) if with_file.exists() else {}


def settings(
    home: Path,
    ip: str,
    port: int,
    authenticator: str,
    admins: list[str],
    python: str,
    hub_ip: str = "127.0.0.1",
    proxy_running: bool = False,
) -> HubSettings:
    """This start's settings, reusing the internal ports of the last start while they are free; with the last
    start's proxy still running (the Hub died alone), its API port, which that proxy holds."""
    make_private_dir(hub_dir(home))  # (the home itself is the cluster's: its mode is the daemon's to set)
    saved = saved_settings(home)
    hub_port, api_port = (
        p if isinstance(p, int) and (bindable(host, p) or kept) else lasting_port(host)
        for p, host, kept in (
            (saved.get("hub_port"), hub_ip, False),
            (saved.get("proxy_api_port"), "127.0.0.1", proxy_running),
        )
    )
    chosen = HubSettings(ip, port, hub_port, api_port, authenticator, admins, python, hub_ip)
    write_private(hub_dir(home) / "hub.json", json.dumps(asdict(chosen), indent=2))
    return chosen


def find_proxy(given: str | None) -> str:
    """configurable-http-proxy: the one given, else on PATH, else the checkout's (``make hub``); SystemExit saying
    how to get one."""
    if given and not os.access(given, os.X_OK):
        raise SystemExit(f"pai hub: --proxy {given} is not a program this account can run")
    for candidate in (given, shutil.which(PROXY), str(REPO_PROXY) if REPO_PROXY.exists() else None):
        if candidate and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)  # (it runs in the Hub's folder)
    raise SystemExit(
        "pai hub: configurable-http-proxy (JupyterHub's proxy, an npm package) is not installed: `make hub` "
        "installs it in the checkout, or `npm install -g configurable-http-proxy`, or name it with --proxy"
    )


def server_python(given: str | None, isolating: bool) -> str:
    """The Python that runs users' servers in their jobs, checked: it imports jupyterhub's single-user server,
    JupyterLab and pai_jupyter, and (when other accounts run the servers) every account can run it. SystemExit
    saying what is missing."""
    tools = os.environ.get(TASK_TOOLS)
    python = given or (os.path.join(tools, "bin", "python3") if tools else sys.executable)
    how = (
        "make a Python environment every account can use, e.g. `python3 -m venv /opt/pai-task-tools && "
        "/opt/pai-task-tools/bin/pip install 'pai_jupyter[lab,hub]'`, then start with "
        f"{TASK_TOOLS}=/opt/pai-task-tools (for the daemon too) or --server-python /opt/pai-task-tools/bin/python3"
    )
    if not os.path.exists(python):
        raise SystemExit(f"pai hub: the servers' Python {python} does not exist; {how}")
    if isolating and not usable_by_others(python):
        raise SystemExit(
            f"pai hub: users' servers run as their own accounts, which cannot run {python} (a directory on the way "
            f"is private); {how}"
        )
    probe = "import jupyterhub.singleuser, jupyterlab, pai_jupyter.server"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"pai hub: {python} cannot run a user's server ({last}); {how}")
    return python


def link_daemon(home: Path, chosen: HubSettings, token_file: Path) -> None:
    """The daemon's ``local/hub.yaml`` (read again by a running daemon when it changes): the Hub's API, the
    service's token file, and whose OS accounts users' tasks run as (PAM: their own)."""
    link = {
        "apiUrl": chosen.api_url,
        "tokenFile": str(token_file),
        "service": SERVICE,
        "accounts": "own" if chosen.authenticator == "pam" else "dedicated",
    }
    write_private(local_dir(home) / "hub.yaml", yaml.safe_dump(link, sort_keys=False))


def _read(path: Path) -> str:
    """The config's expression for a secret's text, read from its file when the Hub starts (never in the config)."""
    return f"Path({str(path)!r}).read_text().strip()"


def write_config(home: Path, chosen: HubSettings) -> Path:
    """``hub/jupyterhub_config.py`` (0600), written afresh at each start."""
    folder = hub_dir(home)
    files = {name: folder / name for name in ("service-token", "proxy-token", "dummy-password", "admin-password")}
    roles = [
        {"name": "user", "scopes": ["self", f"access:services!service={SERVICE}"]},
        {"name": "pai-service", "scopes": ["list:users", "read:users:name"], "services": [SERVICE]},
    ]
    lines = [
        "# Written by `pai hub start` (pai_jupyter) at each start: edit the options of that command, or run your own",
        "# Hub with the snippet of docs/hub.md.",
        "from pathlib import Path",
        "",
        f"c.JupyterHub.ip = {chosen.ip!r}",
        f"c.JupyterHub.port = {chosen.port}",
        "# the Hub's API: where users' servers reach it (on a batch system's nodes: this host's address there)",
        f"c.JupyterHub.hub_ip = {chosen.hub_ip!r}",
        f"c.JupyterHub.hub_port = {chosen.hub_port}",
        f"c.JupyterHub.db_url = {'sqlite:///' + str(folder / 'jupyterhub.sqlite')!r}",
        f"c.JupyterHub.cookie_secret_file = {str(folder / 'cookie_secret')!r}",
        f"c.JupyterHub.pid_file = {str(folder / 'hub.pid')!r}",
        "# the proxy runs beside the Hub (pai hub start) and outlives its restarts; so do users' servers (jobs)",
        "c.ConfigurableHTTPProxy.should_start = False",
        f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{chosen.proxy_api_port}'",
        f"c.ConfigurableHTTPProxy.auth_token = {_read(files['proxy-token'])}",
        "c.JupyterHub.cleanup_servers = False",
        "c.JupyterHub.allow_named_servers = True",
        "c.JupyterHub.spawner_class = 'pai'",
        f"c.PAISpawner.service_token_file = {str(files['service-token'])!r}",
        f"c.PAISpawner.server_python = {chosen.server_python!r}",
        "# the workbench: a Hub service known by its token, which users may use and which reads the user list",
        f"c.JupyterHub.services = [{{'name': {SERVICE!r}, 'api_token': {_read(files['service-token'])}}}]",
        f"c.JupyterHub.load_roles = {roles!r}",
        "c.Authenticator.allow_all = True",
        f"c.Authenticator.admin_users = {set(chosen.admins)!r}" if chosen.admins else "",
    ]
    if chosen.authenticator == "dummy":
        lines += [
            "# FOR TRYING ONLY: any name signs in with the shared password (the admins with theirs)",
            "c.JupyterHub.authenticator_class = 'shared-password'",
            f"c.SharedPasswordAuthenticator.user_password = {_read(files['dummy-password'])}",
            f"c.SharedPasswordAuthenticator.admin_password = {_read(files['admin-password'])}",
        ]
    else:
        lines.append("c.JupyterHub.authenticator_class = 'pam'  # the accounts of this machine")
    path = folder / "jupyterhub_config.py"
    write_private(path, "\n".join(line for line in lines if line is not None) + "\n")
    return path


def prepare(home: Path, chosen: HubSettings) -> tuple[Path, dict[str, str]]:
    """The Hub's files: its secrets (made once, 0600), the daemon's link, the config; (config, the environment
    the Hub and the proxy start with)."""
    folder = hub_dir(home)
    make_private_dir(folder)
    service = folder / "service-token"
    private_file(service, lambda: secrets.token_hex(32))
    proxy_token = private_file(folder / "proxy-token", lambda: secrets.token_hex(32))
    private_file(folder / "dummy-password", lambda: secrets.token_urlsafe(12))
    private_file(folder / "admin-password", lambda: secrets.token_urlsafe(32))  # (the Hub wants 32 characters)
    link_daemon(home, chosen, service)
    config = write_config(home, chosen)
    env = {**os.environ, "CONFIGPROXY_AUTH_TOKEN": proxy_token, "PAI_JUPYTER_HOME": str(home)}
    return config, env
