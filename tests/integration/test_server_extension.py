"""The Jupyter server extension, all real: the daemon (process runtime) runs a job whose TensorBoard and Jupyter
the daemon started; a real ``jupyter server`` with the extension proxies them, a terminal and metrics."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from tornado.httpclient import HTTPClientError

from pai_jupyter.client import Client
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import (
    JupyterServer,
    execute,
    services_job,
    services_up,
    task_terminal,
    task_url,
    write_events,
)
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = pytest.mark.slow
MARKUP = "<script>alert(1)</script>"


@dataclass
class Env:
    home: Path
    api: Api
    pai: Client
    jupyter: JupyterServer
    job: str  # root's job: TensorBoard + Jupyter
    plain: str  # root's job without services
    bobs: str  # bob's job with TensorBoard

    def running(self, job: str, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        return services_up(self.pai, job, names)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("server-ext")
    home = tmp / "home"
    with servers(tmp) as s:
        api = s.daemon()
        logdir = write_events(tmp / "tb")
        job = api.submit_ok(services_job("svc", tensorboard=str(logdir), jupyter=True))
        plain = api.submit_ok(services_job("plain"))
        bob = api.new_user("bob")
        bobs = bob.submit_ok(services_job("bobs", tensorboard=str(logdir)))
        jupyter = s.jupyter({"metrics_min_interval": 0.2, "metrics_default_interval": 0.5})
        yield Env(home, api, Client(home=home), jupyter, job, plain, bobs)


def ws_status(env: Env, path: str, token: str | None = "own") -> int:
    """The HTTP status a websocket handshake got (101 when it was accepted)."""

    async def go() -> int:
        try:
            ws = await env.jupyter.ws(path, token)
        except HTTPClientError as exc:
            return exc.code
        ws.close()
        return 101

    return asyncio.run(go())


def test_tensorboard_page_and_data_through_the_proxy(env: Env) -> None:
    tb = env.running(env.job, ("tensorboard",))["tensorboard"]
    http = env.jupyter.http()
    runs = wait_for(
        lambda: "run_a" in (r := http.get(task_url(env.job, "tensorboard/data/runs"))).text and r,
        60,
        "TensorBoard to load the event file",
    )
    assert runs.status_code == 200 and runs.json() == ["run_a"]
    direct = f"http://{tb['host']}:{tb['port']}/data/runs"
    assert httpx.get(direct, timeout=10).status_code == 403  # only through the proxy, which holds the token
    assert runs.json() == httpx.get(direct, headers={"Authorization": f"token {tb['token']}"}, timeout=10).json()
    page = http.get(task_url(env.job, "tensorboard/"))
    assert page.status_code == 200 and "tb-relative-root" in page.text
    scalars = wait_for(
        lambda: (
            (
                r := http.get(
                    task_url(env.job, "tensorboard/data/plugin/scalars/scalars"), params={"run": "run_a", "tag": "loss"}
                )
            ).status_code
            == 200
            and r
        ),
        30,
        "the loss scalars",
    )
    assert [p[1] for p in scalars.json()] == [0, 1, 2, 3, 4]
    bare = http.get(task_url(env.job, "tensorboard"), params={"x": "1"})
    assert bare.status_code == 302 and bare.headers["Location"] == f"/{task_url(env.job, 'tensorboard/')}?x=1"


def test_in_job_jupyter_executes_a_cell(env: Env) -> None:
    token = env.running(env.job, ("jupyter",))["jupyter"]["token"]
    http = env.jupyter.http()
    status = http.get(task_url(env.job, "jupyter/api/status"))
    assert status.status_code == 200 and "kernels" in status.json()
    kernel = http.post(task_url(env.job, "jupyter/api/kernels"), json={"name": "python3"})
    assert kernel.status_code == 201, kernel.text
    kid = kernel.json()["id"]

    async def run() -> str:
        ws = await env.jupyter.ws(task_url(env.job, f"jupyter/api/kernels/{kid}/channels"))
        try:
            return await execute(ws, "6*7")
        finally:
            ws.close()

    assert asyncio.run(run()) == "42"
    assert http.delete(task_url(env.job, f"jupyter/api/kernels/{kid}")).status_code == 204
    assert token not in status.text + kernel.text  # the in-task token stays between the proxy and the task
    assert http.get(task_url(env.job, "jupyter/pai/api/jobs")).status_code == 404  # the extension is off in tasks


def test_proxied_http_and_websocket_traffic_is_jupyters_activity(env: Env) -> None:
    """Idle culling (Jupyter's own, JupyterHub's) reads ``last_activity`` of ``api/status``: a request through the
    proxy moves it, and so does a message relayed on a websocket (jupyter-server-proxy's activity hook)."""
    env.running(env.job, ("jupyter",))
    http = env.jupyter.http()

    def last() -> datetime:  # api/status itself is not activity
        return datetime.fromisoformat(http.get("api/status").json()["last_activity"].replace("Z", "+00:00"))

    before = last()
    assert http.get(task_url(env.job, "jupyter/api/status")).status_code == 200
    after_http = last()
    assert after_http > before
    kernel = http.post(task_url(env.job, "jupyter/api/kernels"), json={"name": "python3"})
    assert kernel.status_code == 201, kernel.text
    kid = kernel.json()["id"]

    async def run() -> tuple[datetime, str, datetime]:
        ws = await env.jupyter.ws(task_url(env.job, f"jupyter/api/kernels/{kid}/channels"))
        try:
            opened = await asyncio.to_thread(last)
            return opened, await execute(ws, "6*7"), await asyncio.to_thread(last)
        finally:
            ws.close()

    try:
        opened, result, after_ws = asyncio.run(run())
    finally:
        http.delete(task_url(env.job, f"jupyter/api/kernels/{kid}"))
    assert result == "42" and after_ws > opened > after_http


def test_bodies_both_ways_through_the_in_job_jupyter(env: Env) -> None:
    env.running(env.job, ("jupyter",))
    http = env.jupyter.http()
    blob = os.urandom(3 * 2**20 + 17)
    put = http.put(
        task_url(env.job, "jupyter/api/contents/blob.bin"),
        json={"type": "file", "format": "base64", "content": base64.b64encode(blob).decode()},
    )
    assert put.status_code in (200, 201), put.text
    got = http.get(task_url(env.job, "jupyter/files/blob.bin"))
    assert got.status_code == 200 and got.content == blob and got.headers["Content-Length"] == str(len(blob))
    head = http.head(task_url(env.job, "jupyter/files/blob.bin"))
    assert head.status_code == 200 and head.headers["Content-Length"] == str(len(blob)) and head.content == b""
    gone = http.get(task_url(env.job, "jupyter/files/missing.bin"))
    assert gone.status_code == 404  # the task's Jupyter's own answer, passed through


def test_terminal_round_trip_on_the_process_runtime(env: Env) -> None:
    assert "42MARK" in task_terminal(env.jupyter, env.plain)


def test_jobs_route_lists_the_profiles_jobs_with_service_urls(env: Env) -> None:
    env.running(env.job, ("tensorboard", "jupyter"))
    body = env.jupyter.http().get("pai/api/jobs").json()
    assert body["profile"] == "local" and body["user"] == "root"
    jobs = {j["id"]: j for j in body["jobs"]}
    assert set(jobs) == {env.job, env.plain}  # not bob's
    task = jobs[env.job]["tasks"][0]
    assert {s["name"]: (s["title"], s["url"]) for s in task["services"]} == {
        "tensorboard": ("TensorBoard", f"/{task_url(env.job, 'tensorboard/')}"),
        "jupyter": ("Jupyter", f"/{task_url(env.job, 'jupyter/lab')}"),
    }
    # the job page's answer: each task's services, only those it has (the plain job's task has none)
    detail = env.jupyter.http().get(f"pai/api/jobs/{env.job}").json()["tasks"][0]["services"]
    assert [(s["name"], s["url"]) for s in detail] == [(s["name"], s["url"]) for s in task["services"]]
    assert env.jupyter.http().get(f"pai/api/jobs/{env.plain}").json()["tasks"][0]["services"] == []
    assert task["terminalUrl"] == f"/{task_url(env.job, 'terminal/websocket')}"
    assert jobs[env.job]["metricsUrl"] == f"/pai/api/jobs/{env.job}/metrics"
    assert jobs[env.plain]["tasks"][0]["services"] == []
    secrets = [s.token for s in env.pai.services(env.job) if s.token] + [env.api.token]
    assert not any(s in json.dumps(body) for s in secrets)
    http = env.jupyter.http()
    assert {j["id"] for j in http.get("pai/api/jobs", params={"state": "RUNNING", "limit": 5}).json()["jobs"]} == {
        env.job,
        env.plain,
    }
    odd = http.get("pai/api/jobs", params={"state": MARKUP})
    assert odd.status_code in (200, 400) and "<script" not in odd.text


def test_metrics_websocket_rate_and_pause(env: Env) -> None:
    async def run() -> None:
        ws = await env.jupyter.ws(f"pai/api/jobs/{env.plain}/metrics")
        try:
            first = json.loads(await asyncio.wait_for(ws.read_message(), 30))
            assert first["gpu"]["available"] is False and first["tasks"][0]["role"] == "main"
            assert first["tasks"][0]["memoryLimitBytes"] == 1024 * 2**20
            ws.write_message(json.dumps({"rate": 0.01}))  # below the server's minimum (0.2 s)
            stamps = []
            for _ in range(4):
                await asyncio.wait_for(ws.read_message(), 30)
                stamps.append(time.monotonic())
            assert min(b - a for a, b in itertools.pairwise(stamps)) >= 0.15
            ws.write_message(json.dumps({"pause": True}))
            with pytest.raises(asyncio.TimeoutError):
                while True:  # at most one snapshot already on its way, then silence
                    await asyncio.wait_for(ws.read_message(), 1.5)
            ws.write_message(json.dumps({"pause": False}))
            assert "tasks" in json.loads(await asyncio.wait_for(ws.read_message(), 10))
            ws.write_message("not json")
            assert "error" in json.loads(await asyncio.wait_for(ws.read_message(), 10))
        finally:
            ws.close()

    asyncio.run(run())


# ---- refusals ------------------------------------------------------------------------------------------------
def test_every_route_needs_jupyters_auth(env: Env) -> None:
    page = task_url(env.job, "tensorboard/")
    for token in (None, "wrong-token"):
        http = env.jupyter.http(token)
        r = http.get(page)
        assert r.status_code == 302 and r.headers["Location"].startswith("/login?next=")
        assert http.post(task_url(env.job, "jupyter/api/kernels"), json={}).status_code == 403
        assert http.get("pai/api/jobs").status_code == 403
        assert http.get("pai/nothing/here").status_code == 302
        for path in (
            task_url(env.job, "jupyter/api/kernels/x/channels"),
            task_url(env.plain, "terminal/websocket"),
            f"pai/api/jobs/{env.plain}/metrics",
        ):
            assert ws_status(env, path, token) == 403, path


def test_cookie_auth_needs_xsrf_for_writes(env: Env) -> None:
    env.running(env.job, ("jupyter",))
    http = env.jupyter.http(None)
    assert http.get("api/status", params={"token": env.jupyter.token}).status_code == 200  # sets the login cookie
    kernels = task_url(env.job, "jupyter/api/kernels")
    assert http.post(kernels, json={}).status_code == 403  # forged cross-site write: no _xsrf
    assert http.get(task_url(env.job, "jupyter/api/status")).status_code == 200  # our _xsrf cookie is set here
    r = http.post(kernels, json={}, headers={"X-XSRFToken": http.cookies["_xsrf"]})
    assert r.status_code == 201, r.text
    assert http.delete(f"{kernels}/{r.json()['id']}", headers={"X-XSRFToken": http.cookies["_xsrf"]}).status_code == 204


def test_cookie_auth_writes_to_tensorboard_must_come_from_this_origin(env: Env) -> None:
    """TensorBoard's dashboard POSTs its data queries without an XSRF token: the Origin header decides."""
    env.running(env.job, ("tensorboard",))
    http = env.jupyter.http(None)
    assert http.get("api/status", params={"token": env.jupyter.token}).status_code == 200  # sets the login cookie
    series = task_url(env.job, "tensorboard/experiment/defaultExperimentId/data/plugin/timeseries/timeSeries")
    form = {"requests": json.dumps([{"plugin": "scalars", "tag": "loss", "run": "run_a"}])}
    own = "{0.scheme}://{0.netloc}".format(urlsplit(env.jupyter.url))
    for origin in (None, "http://evil.example", MARKUP):
        r = http.post(series, data=form, headers={"Origin": origin} if origin else {})
        assert r.status_code == 403 and "<script" not in r.text, origin
    r = http.post(series, data=form, headers={"Origin": own})
    assert r.status_code == 200 and "loss" in r.text, r.text[:300]
    assert env.jupyter.http().post(series, data=form).status_code == 200  # token-authenticated: no cookie to forge


def test_another_users_job_is_not_found(env: Env) -> None:
    http = env.jupyter.http()
    for what in ("tensorboard/", "tensorboard/data/runs", "jupyter/api/status"):
        assert http.get(task_url(env.bobs, what)).status_code == 404
    assert ws_status(env, task_url(env.bobs, "terminal/websocket")) == 404
    assert ws_status(env, f"pai/api/jobs/{env.bobs}/metrics") == 404
    assert ws_status(env, task_url(env.bobs, "tensorboard/ws")) == 404


def test_unknown_jobs_tasks_services_and_ports_are_not_found(env: Env) -> None:
    tb = env.running(env.job, ("tensorboard",))["tensorboard"]
    http = env.jupyter.http()
    for path in (
        "pai/jobs/root~nope/main/0/tensorboard/",
        task_url(env.plain, "tensorboard/"),
        task_url(env.plain, "jupyter/api/status"),
        f"pai/jobs/{env.job}/main/1/tensorboard/",
        f"pai/jobs/{env.job}/other/0/tensorboard/",
        task_url(env.job, f"{tb['port']}/"),
        task_url(env.job, f"tensorboard:{tb['port']}/"),
        f"pai/jobs/{env.job}/main/0/ssh/",
        f"pai/proxy/{tb['port']}/",
        f"pai/jobs/127.0.0.1:{tb['port']}/data/runs",
    ):
        r = http.get(path)
        assert r.status_code == 404, path
        assert r.headers["Content-Type"].startswith("application/json")
    assert ws_status(env, "pai/jobs/root~nope/main/0/terminal/websocket") == 404
    assert ws_status(env, "pai/api/jobs/root~nope/metrics") == 404


def raw_get(url: str, path: str, token: str) -> tuple[int, bytes]:
    """GET with the path sent byte for byte (httpx would percent-encode the markup)."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: token {token}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_markup_in_the_path_is_refused_and_not_reflected(env: Env) -> None:
    http = env.jupyter.http()
    paths = [
        f"/pai/jobs/{MARKUP}~x/main/0/tensorboard/",
        f"/pai/jobs/root~{MARKUP}/main/0/tensorboard/",
        f"/pai/jobs/{env.job}/{MARKUP}/0/tensorboard/",
        f"/pai/jobs/{env.job}/main/0/{MARKUP}/",
        f"/pai/{MARKUP}",
        f"/pai/api/jobs/root~{MARKUP}/metrics",
    ]
    for path in paths:
        status, body = raw_get(env.jupyter.url, path, env.jupyter.token)
        assert status == 404, path
        assert b"<script" not in body.lower() and b"alert" not in body, body
        r = http.get(path.lstrip("/"))
        assert r.status_code == 404 and "<script" not in r.text.lower() and "alert" not in r.text, r.text
