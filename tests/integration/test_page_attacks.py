"""What a task serves cannot act as the user's Jupyter server, and no local process reaches its desktop.

The attacks, for real: a task takes its own service's port (it stops the service the daemon started for it and
serves files there instead, as any task, or an image's own "tensorboard", can) and serves a page or a noVNC
``core/rfb.js`` that reads this server's ``_xsrf`` cookie and POSTs ``/api/terminals`` — a terminal as the
account that runs the Jupyter server. Opened in real Chromium through the proxy, it must get nowhere. A local
process that opens websockify's port itself must not reach VNC (five wrong passwords there once locked the owner
out). And a task's JupyterLab does not restore another Lab's documents.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketClientConnection, WebSocketClosedError, websocket_connect

from pai_jupyter.client import Client
from tests.helpers.browser import Watched, opened
from tests.helpers.desktop import need_desktop
from tests.helpers.jupyter_fixture import JupyterServer, services_job, services_up, task_url
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ATTACK = """
(async () => {
  const r = { origin: self.origin };
  try { r.cookie = document.cookie; } catch (e) { r.cookie = "refused " + e.name; }
  const xsrf = ((/(?:^|; )_xsrf=([^;]*)/.exec(r.cookie) || [])[1]) || "";
  const tries = [
    ["jobs", "/pai/api/jobs", { credentials: "include" }],
    ["terminal", "/api/terminals",
     { method: "POST", credentials: "include", headers: xsrf ? { "X-XSRFToken": xsrf } : {} }],
  ];
  for (const [name, url, init] of tries) {
    try { r[name] = (await fetch(url, init)).status; } catch (e) { r[name] = "refused " + e.name; }
  }
  document.title = "attack " + JSON.stringify(r);
})();
"""
FILES = {
    "index.html": '<!doctype html><html><head><script src="attack.js"></script></head><body>impostor</body></html>',
    "attack.js": ATTACK,
    "core/rfb.js": ATTACK + "export default class RFB extends EventTarget {}\n",  # noVNC's module, as imported
}


def impostor(service: str, under: str = "") -> str:
    """A task command that serves FILES (in the directory ``under``, a shell word: where the proxy asks) on its
    own ``service``'s port once it has stopped that service."""
    files = base64.b64encode(json.dumps(FILES).encode()).decode()
    py = sys.executable
    return "\n".join(
        [
            f'port="$PAI_CONTAINER_HOST_{service}_PORT_LIST"; top=$(mktemp -d); d="$top/{under}"',
            f"{py} -c 'import base64, json, os, sys; [os.makedirs(os.path.dirname(os.path.join(sys.argv[2], n)), "
            'exist_ok=True) or open(os.path.join(sys.argv[2], n), "w").write(t) for n, t in '
            f'json.loads(base64.b64decode(sys.argv[1])).items()]\' {files} "$d"',
            f"until {py} -c 'import socket, sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1])), 1)' "
            '"$port" 2>/dev/null; do sleep 0.2; done',  # the real service is up: its pid file is written
            f'for f in "$PAI_TASK_DIR"/run/service-{service}.pid "$PAI_TASK_DIR"/service-{service}.pid; do '
            '[ -f "$f" ] && kill "$(cat "$f")"; done',
            f'until {py} -m http.server --bind 127.0.0.1 --directory "$top" "$port"; do sleep 0.2; done',
        ]
    )


def desktop_job(name: str, command: str = "sleep 600") -> str:
    doc = json.loads(services_job(name, command))
    doc["extras"] = {"com.microsoft.pai.runtimeplugin": [{"plugin": "desktop", "parameters": {"geometry": "800x600"}}]}
    return json.dumps(doc)


@dataclass
class Env:
    pai: Client
    jupyter: JupyterServer
    home: Path  # the HOME the daemon's tasks get


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("attacks")
    home = tmp / "user-home"  # the HOME tasks share with the user's own Labs
    home.mkdir()
    old = os.environ.get("HOME")
    with servers(tmp) as s:
        os.environ["HOME"] = str(home)  # the daemon's, so its tasks'
        try:
            s.daemon()
        finally:
            if old is not None:
                os.environ["HOME"] = old
        jupyter = s.jupyter(extensions={"jupyter_server_terminals": True})  # what the attack wants: terminals
        yield Env(Client(home=s.home), jupyter, home)


def terminals(env: Env) -> list[Any]:
    r = env.jupyter.http().get("api/terminals")
    assert r.status_code == 200, r.text
    return list(r.json())


def attacked(env: Env, browser: Any, path: str, done: str) -> tuple[str, list[str]]:
    """Open ``path`` signed in; wait until the page's title says the attack ran or the selector ``done``
    appears; the page's title and the paths it asked for."""
    with opened(browser, shot="page-attack") as w:
        w.page.goto(f"{env.jupyter.url}api/status?token={env.jupyter.token}")  # signs the browser in (cookie)
        w.page.goto(env.jupyter.url + path)
        wait_for(
            lambda: w.page.title().startswith("attack") or (done and w.page.locator(done).count()),
            60,
            lambda: f"the attack's result or {done!r} ({_page_said(w)})",
        )
        return w.page.title(), w.paths


def _page_said(w: Watched) -> str:
    """What a page that did not get there showed and asked for: its title, the body's data, its status line, the
    requests that failed and the noVNC modules it fetched."""
    body = w.page.evaluate("() => ({...document.body.dataset, status: document.getElementById('status')?.textContent})")
    novnc = [p for p in w.paths if "/novnc/" in p]
    return f"title {w.page.title()!r}, body {body}, failed {w.failed}, {len(novnc)} noVNC requests"


def test_a_tensorboard_page_from_the_task_cannot_act_as_the_jupyter_server(env: Env, browser: Any) -> None:
    job = env.pai.submit(services_job("tbattack", impostor("tensorboard"), tensorboard="/tmp"))
    wait_for(
        lambda: env.jupyter.http().get(task_url(job, "tensorboard/")).text.find("impostor") >= 0,
        120,
        "the impostor on TensorBoard's port",
    )
    title, _ = attacked(env, browser, task_url(job, "tensorboard/"), "")
    result = json.loads(title.removeprefix("attack "))
    assert result["origin"] == "null" and "_xsrf" not in result["cookie"], result  # an opaque origin: no cookie
    assert str(result["jobs"]).startswith("refused") and str(result["terminal"]).startswith("refused"), result
    assert terminals(env) == []


def test_a_page_from_the_tasks_jupyter_port_cannot_act_as_the_jupyter_server(env: Env, browser: Any) -> None:
    base = "pai/jobs/${PAI_USER_NAME}~${PAI_JOB_NAME}/main/0/jupyter"  # the in-task Jupyter's base path
    job = env.pai.submit(services_job("jpattack", impostor("jupyter", base), jupyter=True))
    wait_for(
        lambda: "impostor" in env.jupyter.http().get(task_url(job, "jupyter/")).text,
        120,
        "the impostor on the in-task Jupyter's port",
    )
    title, _ = attacked(env, browser, task_url(job, "jupyter/"), "")
    result = json.loads(title.removeprefix("attack "))
    assert result["origin"] == "null" and "_xsrf" not in result["cookie"], result
    assert str(result["jobs"]).startswith("refused") and str(result["terminal"]).startswith("refused"), result
    assert terminals(env) == []


def test_the_desktop_page_runs_no_code_from_the_task(env: Env, browser: Any) -> None:
    need_desktop()
    job = env.pai.submit(desktop_job("dtattack", impostor("desktop")))
    http = env.jupyter.http()
    wait_for(
        lambda: services_up(env.pai, job, ("desktop",)) and http.get(task_url(job, "desktop/")).status_code == 200,
        120,
        "the desktop page",
    )
    wait_for(lambda: "impostor" in _direct(env, job, "desktop"), 120, "the impostor on the desktop's port")
    # a failed try (no VNC there) marks the body until a connect; "disconnected" lasts only until the next try
    title, paths = attacked(env, browser, task_url(job, "desktop/"), "body[data-failures]")
    assert not title.startswith("attack"), title
    assert not [p for p in paths if "/desktop/core/" in p]  # noVNC came from pai/novnc/, not from the task
    assert any("pai/novnc/core/rfb.js" in p for p in paths)
    assert http.get(task_url(job, "desktop/core/rfb.js")).status_code == 404  # nothing but the websocket reaches it
    assert terminals(env) == []


def _direct(env: Env, job: str, service: str) -> str:
    import httpx

    svc = next(s for s in env.pai.services(job) if s.name == service)
    try:
        return httpx.get(f"http://{svc.host}:{svc.port}/", timeout=5).text
    except httpx.HTTPError:
        return ""


class Rfb:
    """The start of an RFB (VNC) handshake over a websocket, far enough to choose VNC auth and answer wrongly."""

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws, self.buf = ws, bytearray()

    async def read(self, n: int) -> bytes:
        while len(self.buf) < n:
            msg = await asyncio.wait_for(self.ws.read_message(), 20)
            if msg is None:
                raise EOFError("the websocket closed")
            self.buf.extend(msg if isinstance(msg, bytes) else msg.encode())
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def security_types(self) -> list[int] | str:
        """The server's security types, or its reason for offering none."""
        version = await self.read(12)
        await self.ws.write_message(version, binary=True)
        n = (await self.read(1))[0]
        if n == 0:
            return (await self.read(int.from_bytes(await self.read(4), "big"))).decode()
        return list(await self.read(n))

    async def wrong_password(self) -> None:
        await self.ws.write_message(bytes([2]), binary=True)  # VNC authentication
        await self.read(16)  # the challenge
        await self.ws.write_message(bytes(16), binary=True)  # not its DES with the password
        assert int.from_bytes(await self.read(4), "big") == 1  # failed


def test_no_local_process_reaches_the_desktop_or_locks_its_owner_out(env: Env) -> None:
    need_desktop()
    job = env.pai.submit(desktop_job("lockout"))
    svc = services_up(env.pai, job, ("desktop",))["desktop"]

    async def local_process() -> list[int | str]:
        """Any local account: websockify's port, as the Jupyter server's proxy would reach it, without the token;
        six tries with a wrong VNC password. What each got: the HTTP refusal, or what VNC said."""
        outcomes: list[int | str] = []
        for _ in range(6):
            try:
                ws = await websocket_connect(
                    HTTPRequest(f"ws://{svc['host']}:{svc['port']}/websockify", connect_timeout=10),
                    subprotocols=["binary"],
                )
            except HTTPClientError as exc:
                outcomes.append(exc.code)
                continue
            try:
                rfb = Rfb(ws)
                offered = await rfb.security_types()
                if isinstance(offered, str):  # refused by VNC itself
                    outcomes.append(offered)
                    continue
                await rfb.wrong_password()
                outcomes.append("wrong password")
            except (EOFError, WebSocketClosedError, StreamClosedError):
                outcomes.append("closed by VNC")
            finally:
                ws.close()
        return outcomes

    async def owner() -> list[int] | str:
        ws = await env.jupyter.ws(task_url(job, "desktop/websockify"))
        try:
            return await Rfb(ws).security_types()
        except (EOFError, WebSocketClosedError, StreamClosedError) as exc:
            return f"closed: {exc!r}"
        finally:
            ws.close()

    def run(coro: Any) -> Any:  # own thread and loop: Playwright's may be running in this one
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, coro).result()

    outcomes = run(local_process())
    offered = run(owner())  # VNC offers the owner its password check, not "Too many security failures"
    assert outcomes == [403] * 6, (outcomes, offered)  # refused before the websocket, so before VNC
    assert isinstance(offered, list) and 2 in offered, offered


def test_the_in_task_jupyterlab_keeps_its_own_workspaces(env: Env) -> None:
    """Two tasks' JupyterLabs in one HOME: what one saves as its workspace, the other does not restore."""
    pai = env.pai
    a, b = (pai.submit(services_job(n, jupyter=True)) for n in ("laba", "labb"))
    services_up(pai, a, ("jupyter",))
    services_up(pai, b, ("jupyter",))
    http = env.jupyter.http()
    if http.get(task_url(a, "jupyter/lab")).status_code == 404:
        pytest.skip("JupyterLab is not installed where the task runs")
    layout = {
        "data": {"notebook:elsewhere.ipynb": {"data": {"path": "elsewhere.ipynb", "factory": "Notebook"}}},
        "metadata": {"id": "default"},
    }
    saved = http.put(task_url(a, "jupyter/lab/api/workspaces/default"), json=layout)
    assert saved.status_code == 204, saved.text
    got = http.get(task_url(a, "jupyter/lab/api/workspaces/default")).json()
    assert "notebook:elsewhere.ipynb" in got["data"]  # a's own
    other = http.get(task_url(b, "jupyter/lab/api/workspaces/default")).json()
    assert "notebook:elsewhere.ipynb" not in other["data"], other
    assert not list(env.home.rglob("*.jupyterlab-workspace")), "a task's workspace was written into the user's HOME"
