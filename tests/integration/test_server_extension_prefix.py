"""The extension behind a Jupyter server whose base_url is not "/", as JupyterHub runs each user's server under
/user/NAME/: the proxied TensorBoard, the in-task Jupyter (its pages rewritten to carry the prefix, its API
and kernel websocket), a terminal and the jobs route, all under the prefix."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.client import Client
from pai_jupyter.cluster import control

from .conftest import kill_leftovers, start_daemon
from .jupyter_fixture import (
    JupyterServer,
    execute,
    services_job,
    start_jupyter,
    task_url,
    terminal_round_trip,
    wait_for,
    write_events,
)

pytestmark = pytest.mark.slow
PREFIX = "/user/tester/"


@dataclass
class Hub:
    pai: Client
    jupyter: JupyterServer
    job: str

    def running(self) -> dict[str, dict[str, Any]]:
        def up() -> dict[str, dict[str, Any]] | None:
            svc = {s["name"]: s for s in self.pai.services(self.job)}
            return svc if all(svc.get(n, {}).get("state") == "running" for n in ("tensorboard", "jupyter")) else None

        return wait_for(up, 120, f"the services of {self.job}")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp = tmp_path_factory.mktemp("prefix")
    home: Path = tmp / "home"
    api = start_daemon(home)
    jupyter = None
    try:
        job = api.submit_ok(services_job("svc", tensorboard=str(write_events(tmp / "tb")), jupyter=True))
        jupyter = start_jupyter(tmp / "jupyter", home, base_url=PREFIX)
        yield Hub(Client(home=home), jupyter, job)
    finally:
        if jupyter is not None:
            jupyter.stop()
        control.stop(home)
        kill_leftovers(home)


def test_tensorboard_and_the_jobs_route_under_a_prefix(hub: Hub) -> None:
    hub.running()
    http = hub.jupyter.http()
    runs = wait_for(lambda: "run_a" in (r := http.get(task_url(hub.job, "tensorboard/data/runs"))).text and r, 60,
                    "TensorBoard to load the event file")
    assert runs.json() == ["run_a"]
    bare = http.get(task_url(hub.job, "tensorboard"))
    assert bare.status_code == 302 and bare.headers["Location"] == f"{PREFIX}{task_url(hub.job, 'tensorboard/')}"
    task = next(j for j in http.get("pai/api/jobs").json()["jobs"] if j["id"] == hub.job)["tasks"][0]
    assert {s["name"]: s["url"] for s in task["services"]} == {
        name: f"{PREFIX}{task_url(hub.job, name + '/')}" for name in ("tensorboard", "jupyter")}
    assert task["terminalUrl"] == f"{PREFIX}{task_url(hub.job, 'terminal/websocket')}"


def test_in_task_jupyter_pages_carry_the_prefix(hub: Hub) -> None:
    hub.running()
    http = hub.jupyter.http()
    inner = f"/{task_url(hub.job, 'jupyter/')}"
    page = http.get(task_url(hub.job, "jupyter/lab"))
    if page.status_code == 404:
        pytest.skip("JupyterLab is not installed where the task runs: the in-task server has no pages")
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    config = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page.text, re.S)
    assert config is not None and f'"baseUrl": "{PREFIX}{inner[1:]}"' in config.group(1)
    assert f'"{inner}' not in page.text and f"'{inner}" not in page.text  # no URL left without the prefix
    assert int(page.headers.get("Content-Length", len(page.content))) == len(page.content)
    status = http.get(task_url(hub.job, "jupyter/api/status"))
    assert status.status_code == 200 and "kernels" in status.json()


def test_in_task_kernel_and_a_terminal_under_a_prefix(hub: Hub) -> None:
    hub.running()
    http = hub.jupyter.http()
    kernel = http.post(task_url(hub.job, "jupyter/api/kernels"), json={"name": "python3"})
    assert kernel.status_code == 201, kernel.text
    kid = kernel.json()["id"]

    async def run() -> tuple[str, str]:
        ws = await hub.jupyter.ws(task_url(hub.job, f"jupyter/api/kernels/{kid}/channels"))
        try:
            result = await execute(ws, "6*7")
        finally:
            ws.close()
        term = await hub.jupyter.ws(task_url(hub.job, "terminal/websocket"))
        try:
            return result, await terminal_round_trip(term)
        finally:
            term.close()

    result, typed = asyncio.run(run())
    assert result == "42" and "42MARK" in typed
    assert http.delete(task_url(hub.job, f"jupyter/api/kernels/{kid}")).status_code == 204
