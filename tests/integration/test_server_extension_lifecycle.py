"""The server extension over time and elsewhere: idle culling and restart (503 while starting), a terminal into a
Docker task, and a remote OpenPAI profile (a stand-in server without the embedded cluster's local routes)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tornado.web
import yaml
from tornado.httpclient import HTTPClientError

from pai_jupyter.client import Client
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import (
    jupyter,
    services_job,
    task_terminal,
    task_url,
    terminal_round_trip,
    write_events,
)
from tests.helpers.standin import serving
from tests.polling import wait_for

pytestmark = pytest.mark.slow


def test_idle_services_and_terminals_are_culled_and_started_again(daemon: Api, pai_home: Path, tmp_path: Path) -> None:
    job = daemon.submit_ok(services_job("cull", tensorboard=str(write_events(tmp_path / "tb"))))
    pai = Client()
    config = {"idle_timeout_minutes": 0.05, "service_start_timeout": 0}  # 3 s idle; never wait for a start
    with jupyter(tmp_path / "jupyter", pai_home, config) as js:
        http = js.http()
        runs = task_url(job, "tensorboard/data/runs")
        wait_for(lambda: "run_a" in http.get(runs).text, 120, "TensorBoard through the proxy")

        async def idle_terminal() -> tuple[str, float]:
            ws = await js.ws(task_url(job, "terminal/websocket"))
            out = await terminal_round_trip(ws)
            t0 = time.monotonic()
            while await asyncio.wait_for(ws.read_message(), 30) is not None:
                pass  # the prompt, then nothing until the server closes the idle terminal
            return out, time.monotonic() - t0

        out, closed_after = asyncio.run(idle_terminal())
        assert "42MARK" in out and 2.5 <= closed_after <= 20

        def tb_state() -> str:
            return next(s.state for s in pai.services(job) if s.name == "tensorboard")

        wait_for(lambda: tb_state() == "stopped", 30, "the idle TensorBoard to be stopped")
        assert "idle" in js.log_text()
        page = http.get(task_url(job, "tensorboard/"), headers={"Accept": "text/html"})  # starts it again and,
        assert page.status_code == 503 and int(page.headers["Retry-After"]) >= 1  # with no wait allowed, says so
        assert '<meta http-equiv="refresh"' in page.text and "starting" in page.text
        r = http.get(runs)
        assert r.status_code == 503 and r.json()["code"] == "Starting" and "starting" in r.json()["message"]
        assert tb_state() in ("starting", "running")
        wait_for(lambda: http.get(runs).status_code == 200, 120, "TensorBoard to come back")


@pytest.mark.docker
def test_terminal_round_trip_in_a_docker_task(docker_daemon: Api, pai_home: Path, tmp_path: Path) -> None:
    job = docker_daemon.submit_ok(services_job("dterm"))
    docker_daemon.wait(job, ("RUNNING",), timeout=60)
    with jupyter(tmp_path / "jupyter", pai_home) as js:
        assert "42MARK" in task_terminal(js, job)
    docker_daemon.stop(job)


# ---- a remote OpenPAI profile --------------------------------------------------------------------------------
TASK = {"taskIndex": 0, "taskState": "RUNNING", "containerIp": "10.0.0.7", "containerPorts": {"ssh": 22}}
STATUS = {"name": "remote", "username": "root", "state": "RUNNING", "totalTaskNumber": 1, "totalGpuNumber": 0}


class OpenPaiStandIn(tornado.web.RequestHandler):
    """The three OpenPAI v2 routes the extension needs; no /api/v2/local/ routes (as a real OpenPAI)."""

    def get(self, path: str) -> None:
        if path == "info":
            self.write({"name": "OpenPAI", "version": "v1.8.0"})
        elif path == "jobs":
            self.write({"totalCount": 1, "data": [STATUS]})
        elif path == "jobs/root~remote":
            self.write({"name": "remote", "jobStatus": STATUS, "taskRoles": {"main": {"taskStatuses": [TASK]}}})
        else:
            self.set_status(404)
            self.write({"code": "NoJobError", "message": "not found"})


@pytest.fixture
def openpai() -> Iterator[str]:
    with serving(tornado.web.Application([(r"/api/v2/(.*)", OpenPaiStandIn)])) as url:
        yield url


def test_a_remote_openpai_profile_says_what_it_cannot_do(openpai: str, pai_home: Path, tmp_path: Path) -> None:
    pai_home.mkdir(parents=True, exist_ok=True)
    (pai_home / "clusters.yaml").write_text(
        yaml.safe_dump({"clusters": [{"name": "remote", "url": openpai, "username": "root", "token": "t0ken"}]})
    )
    with jupyter(tmp_path / "jupyter", pai_home, {"profile": "remote"}) as js:
        http = js.http()
        body = http.get("pai/api/jobs").json()
        assert body["profile"] == "remote" and [j["id"] for j in body["jobs"]] == ["root~remote"]
        row = body["jobs"][0]
        assert "embedded cluster" in row["servicesMessage"]
        assert row["tasks"][0]["terminalUrl"] == "/" + task_url("root~remote", "terminal/websocket")  # web SSH
        r = http.get(task_url("root~remote", "tensorboard/"))
        assert r.status_code == 501 and "embedded cluster" in r.json()["message"]
        r = http.put("pai/api/jobs/root~remote/maxRunTime", json={"minutes": 5})  # the job page's work duration
        assert r.status_code == 501 and r.json()["code"] == "NotSupported"
        access = http.get("pai/api/jobs/root~remote/access").json()
        assert access["sshKey"] is None and access["desktops"] == [] and "embedded cluster" in access["message"]

        async def sockets() -> tuple[int, dict[str, str]]:
            try:
                await js.ws(task_url("root~remote", "terminal/websocket"))
                code = 101
            except HTTPClientError as exc:
                code = exc.code
            ws = await js.ws("pai/api/jobs/root~remote/metrics")
            message = json.loads(await asyncio.wait_for(ws.read_message(), 30))
            assert await asyncio.wait_for(ws.read_message(), 30) is None  # closed after saying why
            return code, message["error"]

        code, error = asyncio.run(sockets())
        assert code == 409  # web SSH: this stand-in serves no job config, so no ssh plugin (see test_ssh_web.py)
        assert error["code"] == "NotSupported" and "embedded cluster" in error["message"]
