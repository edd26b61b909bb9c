"""Services inside tasks (TensorBoard, Jupyter), their stop/start, metrics and the terminal websocket."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import psutil
import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from pai_jupyter.client import Client
from tests.helpers.daemon import Api, v1
from tests.polling import wait_for


def _services_job(name: str) -> str:
    return json.dumps(
        {
            "jobName": name,
            "image": "busybox",
            "extras": {
                "com.microsoft.pai.runtimeplugin": [
                    {"plugin": "tensorboard", "parameters": {"logdir": "tb"}},
                    {"plugin": "jupyter"},
                ]
            },
            "taskRoles": [
                {
                    "name": "main",
                    "taskNumber": 1,
                    "cpuNumber": 1,
                    "memoryMB": 1024,
                    "gpuNumber": 0,
                    "command": "echo user command runs at once; sleep 300",
                }
            ],
        }
    )


def test_tensorboard_and_jupyter_start_beside_the_command(daemon: Api) -> None:
    pai = Client()
    job = pai.submit(_services_job("svc"))
    pai.wait(job, until={"RUNNING"})
    wait_for(lambda: "user command runs at once" in pai.logs(job, stream="stdout"), 10, "the user command")
    wait_for(lambda: all(s.state == "running" for s in pai.services(job)), 90, "both services")
    svc = {s.name: s.model_dump(by_alias=True) for s in pai.services(job)}  # (as the daemon answers them)
    ports = pai.detail(job).tasks[0].container_ports
    assert int(ports["tensorboard"]) == svc["tensorboard"]["port"] and int(ports["jupyter"]) == svc["jupyter"]["port"]
    tb = svc["tensorboard"]
    tb_auth = {"Authorization": f"token {tb['token']}"}
    # TensorBoard answered anyone on the host; now only with the token the proxy holds
    assert httpx.get(f"http://{tb['host']}:{tb['port']}/data/runs", timeout=10).status_code == 403
    assert httpx.get(f"http://{tb['host']}:{tb['port']}/data/runs", headers=tb_auth, timeout=10).status_code == 200
    jp = svc["jupyter"]
    # and no token is on a command line (ps shows those to every local user)
    cmdlines = " ".join(" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
    assert jp["token"] not in cmdlines and tb["token"] not in cmdlines
    user = job.split("~")[0]
    assert jp["basePath"] == f"/pai/jobs/{job}/main/0/jupyter/" and jp["token"]
    url = f"http://{jp['host']}:{jp['port']}{jp['basePath']}api/status"
    assert httpx.get(url, timeout=10).status_code == 403  # the in-task Jupyter wants its token
    assert httpx.get(url, headers={"Authorization": f"token {jp['token']}"}, timeout=10).status_code == 200
    # culling: stop, then start again
    pai.service_action(job, "main", 0, "tensorboard", "stop")
    wait_for(lambda: {s.name: s.state for s in pai.services(job)}["tensorboard"] == "stopped", 10, "stop")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://{tb['host']}:{tb['port']}/data/runs", headers=tb_auth, timeout=2)
    pai.service_action(job, "main", 0, "tensorboard", "start")
    wait_for(lambda: {s.name: s.state for s in pai.services(job)}["tensorboard"] == "running", 60, "restart")
    # another user sees none of it
    token = daemon.http.post("/api/v2/local/users", json={"name": "mallory"}).json()["token"]
    other = Client(url=daemon.url, token=token, username="mallory")
    from pai_jupyter.client import JobNotFound

    with pytest.raises(JobNotFound):
        other.services(job)
    pai.stop(job)
    assert user


def test_metrics_report_cpu_and_memory_without_a_gpu(daemon: Api) -> None:
    pai = Client()
    job = pai.submit(
        v1(
            "busy",
            'python3 -c "import time\nb = bytearray(50 * 2**20)\nt = time.time()\nwhile time.time() - t < 30: pass"',
        )
    )
    pai.wait(job, until={"RUNNING"})
    wait_for(lambda: (pai.metrics(job).tasks[0].memory_bytes or 0) > 50 * 2**20, 20, "memory")
    m = pai.metrics(job).model_dump(by_alias=True)  # (as the daemon answers it)
    task = m["tasks"][0]
    # over a window of >= 1 s of kept samples (this read 0.0 when two calls came close together);
    # a spinning process gets well over 5 % of a core even on a loaded machine
    assert task["cpuPercent"] > 5 and task["memoryLimitBytes"] == 256 * 2**20
    assert m["gpu"]["available"] is False and "NVML" in m["gpu"]["message"]
    pai.stop(job)


async def _terminal_roundtrip(url: str, headers: dict[str, str]) -> str:
    ws = await websocket_connect(HTTPRequest(url, headers=headers, connect_timeout=20))
    out = ""
    try:
        ws.write_message(json.dumps(["stdin", "echo $((6*7))MARK$PAI_TASK_INDEX\r"]))
        deadline = time.monotonic() + 20
        while "42MARK0" not in out and time.monotonic() < deadline:
            msg = await asyncio.wait_for(ws.read_message(), 20)
            if msg is None:
                break
            kind, *rest = json.loads(msg)
            if kind == "stdout":
                out += rest[0]
    finally:
        ws.close()
    return out


def _terminal_case(daemon: Api) -> None:
    pai = Client()
    job = pai.submit(v1(f"term{int(time.time() * 1000) % 100000}", "sleep 300"))
    wait_for(lambda: pai.detail(job).tasks[0].task_state == "RUNNING", 60, "the task")
    url, headers = pai.terminal_endpoint(job, "main", 0)
    assert "42MARK0" in asyncio.run(_terminal_roundtrip(url, headers))
    with pytest.raises(HTTPClientError) as info:  # no token: refused before the upgrade
        asyncio.run(_terminal_roundtrip(url, {}))
    assert info.value.code == 401
    pai.stop(job)


def test_terminal_into_a_process_task(daemon: Api) -> None:
    _terminal_case(daemon)


@pytest.mark.docker
def test_terminal_into_a_container(docker_daemon: Api) -> None:
    _terminal_case(docker_daemon)
