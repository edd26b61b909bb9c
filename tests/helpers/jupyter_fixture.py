"""A real ``jupyter server`` subprocess with the pai_jupyter extension: free port, random token, its own
config, runtime and root dirs, and PAI_JUPYTER_HOME pointing at the test's cluster home."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from pai_jupyter.common.localserver import free_port
from tests.polling import wait_for

# other server extensions installed in the venv are off: quicker starts, and nothing but ours under test
OTHERS_OFF = {
    "jupyterlab": False,
    "jupyter_lsp": False,
    "notebook_shim": False,
    "jupyter_server_terminals": False,
    "jupyter_server_proxy": False,
}


def task_url(job: str, what: str) -> str:
    """The path (relative to the server's base url) of ``what`` in task main[0] of ``job``."""
    return f"pai/jobs/{job}/main/0/{what}"


def lab_settings_file(workdir: Path) -> Path:
    """The file of pai_jupyter's Lab user settings for the Jupyter server in ``workdir`` (Lab reads it at each page
    load)."""
    return workdir / "config" / "lab" / "user-settings" / "pai-jupyter" / "plugin.jupyterlab-settings"


def write_notebook(path: Path, *cells: str | Any) -> Path:
    """A notebook at ``path`` on the python3 kernel, of these code cells (source strings, or nbformat cells that
    carry metadata such as papermill's ``parameters`` tag)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) if isinstance(c, str) else c for c in cells]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@dataclass
class JupyterServer:
    url: str  # http://127.0.0.1:PORT{base_url}
    token: str
    proc: subprocess.Popen[bytes]
    log: Path
    clients: list[httpx.Client] = field(default_factory=list)

    def http(self, token: str | None = "own", **kw: Any) -> httpx.Client:
        """An httpx client on the server; token "own" (default), another string, or None for no auth."""
        value = self.token if token == "own" else token
        headers = {"Authorization": f"token {value}"} if value else {}
        kw.setdefault("timeout", 60)
        client = httpx.Client(base_url=self.url, headers=headers, follow_redirects=False, **kw)
        self.clients.append(client)
        return client

    def ws_url(self, path: str, token: str | None = "own") -> str:
        value = self.token if token == "own" else token
        url = "ws" + self.url[len("http") :] + path.lstrip("/")
        return url + (("&" if "?" in url else "?") + f"token={value}" if value else "")

    async def ws(
        self, path: str, token: str | None = "own", headers: dict[str, str] | None = None
    ) -> WebSocketClientConnection:
        return await websocket_connect(
            HTTPRequest(self.ws_url(path, token), headers=headers or {}, connect_timeout=30, request_timeout=30)
        )

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def start_jupyter(
    workdir: Path,
    pai_home: Path,
    pai_config: dict[str, Any] | None = None,
    timeout: float = 60,
    base_url: str = "/",
    lab: bool = False,
    extensions: dict[str, bool] | None = None,
    lab_settings: dict[str, Any] | None = None,
) -> JupyterServer:
    """Start ``python -m jupyter_server`` with the extension enabled by its own config file (not the installed
    jupyter-config data file, so an editable install needs nothing else) and wait until it answers. Its url
    ends with ``base_url`` (JupyterHub serves each user's server under /user/NAME/). ``lab`` turns JupyterLab's
    pages on. ``extensions`` turns other server extensions on or off (e.g. jupyter_server_proxy for a baseline).
    ``lab_settings``: pai_jupyter's Lab settings (e.g. ``{"refreshSeconds": 1}``, so pages see changes sooner)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_dir, root = workdir / "config", workdir / "root"
    config_dir.mkdir(exist_ok=True)
    root.mkdir(exist_ok=True)
    if lab_settings is not None:
        settings = lab_settings_file(workdir)
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps(lab_settings))
    config = {
        "ServerApp": {
            "jpserver_extensions": {**OTHERS_OFF, "jupyterlab": lab, "pai_jupyter.server": True, **(extensions or {})}
        },
        "PaiJupyter": pai_config or {},
    }
    (config_dir / "jupyter_server_config.json").write_text(json.dumps(config))
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "PAI_JUPYTER_HOME": str(pai_home),
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    env.pop("PAI_PROFILE", None)
    cmd = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.open_browser=False",
        f"--ServerApp.base_url={base_url}",
    ]
    log = workdir / "jupyter.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, cwd=root, start_new_session=True
        )
    server = JupyterServer(f"http://127.0.0.1:{port}{base_url}", token, proc, log)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter server exited with {proc.returncode}:\n{server.log_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            r = httpx.get(server.url + "api/status", headers={"Authorization": f"token {token}"}, timeout=2)
            if r.status_code == 200:
                return server
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"jupyter server did not answer within {timeout:g} s:\n{server.log_text()[-3000:]}")
        time.sleep(0.1)


@contextlib.contextmanager
def jupyter(workdir: Path, pai_home: Path, pai_config: dict[str, Any] | None = None) -> Iterator[JupyterServer]:
    server = start_jupyter(workdir, pai_home, pai_config)
    try:
        yield server
    finally:
        server.stop()


# ---- what the server-extension tests send through the proxy --------------------------------------------------
def write_events(logdir: Path, run: str = "run_a", steps: int = 5) -> Path:
    """A real TensorBoard event file (tensorboard's own writer): scalar ``loss`` at ``steps`` steps."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(logdir / run))
    for step in range(steps):
        value = Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
        writer.add_event(Event(step=step, wall_time=time.time(), summary=Summary(value=[value])))
    writer.close()
    return logdir


def services_job(
    name: str,
    command: str = "sleep 600",
    *,
    tensorboard: str | None = None,
    jupyter: bool = False,
    image: str = "pai-test/busybox:latest",
) -> str:
    """A one-task v1 job with the tensorboard (logdir) and/or jupyter runtime plugins."""
    plugins: list[dict[str, Any]] = []
    if tensorboard:
        plugins.append({"plugin": "tensorboard", "parameters": {"logdir": tensorboard}})
    if jupyter:
        plugins.append({"plugin": "jupyter"})
    role = {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 1024, "gpuNumber": 0, "command": command}
    doc: dict[str, Any] = {"jobName": name, "image": image, "taskRoles": [role]}
    if plugins:
        doc["extras"] = {"com.microsoft.pai.runtimeplugin": plugins}
    return json.dumps(doc)


def services_up(pai: Any, job: str, names: tuple[str, ...], timeout: float = 120) -> dict[str, dict[str, Any]]:
    """Wait until each service in ``names`` of ``job`` is running (``pai``: a pai_jupyter Client); all of the
    job's services by name."""

    def up() -> dict[str, dict[str, Any]] | None:
        svc = {s.name: s.model_dump(by_alias=True) for s in pai.services(job)}  # (as the daemon answers them)
        return svc if all(svc.get(n, {}).get("state") == "running" for n in names) else None

    return wait_for(up, timeout, f"{names} of {job}")


def task_terminal(server: JupyterServer, job: str) -> str:
    """Open the terminal of ``job``'s task main[0] through ``server``, do ``terminal_round_trip`` and close it; the
    output."""
    import asyncio

    async def run() -> str:
        ws = await server.ws(task_url(job, "terminal/websocket"))
        try:
            return await terminal_round_trip(ws)
        finally:
            ws.close()

    return asyncio.run(run())


async def terminal_round_trip(ws: WebSocketClientConnection, marker: str = "MARK", timeout: float = 30) -> str:
    """Type ``echo $((6*7))MARK`` into a terminado websocket; the output once ``42MARK`` came back."""
    import asyncio

    ws.write_message(json.dumps(["set_size", 24, 80]))
    ws.write_message(json.dumps(["stdin", f"echo $((6*7)){marker}\r"]))
    out, deadline = "", time.monotonic() + timeout
    while f"42{marker}" not in out and time.monotonic() < deadline:
        msg = await asyncio.wait_for(ws.read_message(), timeout)
        if msg is None:
            break
        kind, *rest = json.loads(msg)
        if kind == "stdout":
            out += rest[0]
    return out


async def execute(ws: WebSocketClientConnection, code: str, timeout: float = 90) -> str:
    """Run ``code`` in a kernel over its channels websocket (Jupyter's JSON protocol); the result's text/plain."""
    import asyncio
    import uuid

    msg_id = uuid.uuid4().hex
    ws.write_message(
        json.dumps(
            {
                "header": {
                    "msg_id": msg_id,
                    "username": "test",
                    "session": uuid.uuid4().hex,
                    "msg_type": "execute_request",
                    "version": "5.3",
                    "date": "",
                },
                "parent_header": {},
                "metadata": {},
                "channel": "shell",
                "buffers": [],
                "content": {
                    "code": code,
                    "silent": False,
                    "store_history": False,
                    "user_expressions": {},
                    "allow_stdin": False,
                    "stop_on_error": True,
                },
            }
        )
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raw = await asyncio.wait_for(ws.read_message(), timeout)
        if raw is None:
            raise AssertionError("the kernel websocket closed")
        msg = json.loads(raw)
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if msg.get("msg_type") == "execute_result":
            return str(msg["content"]["data"]["text/plain"])
        if msg.get("msg_type") == "error":
            raise AssertionError(f"the cell failed: {msg['content']}")
    raise AssertionError(f"no result within {timeout:g} s")
