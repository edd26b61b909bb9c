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
from tests.helpers.browser import opened
from tests.helpers.jupyter_fixture import (
    JupyterServer,
    execute,
    services_job,
    services_up,
    task_url,
    terminal_round_trip,
    write_events,
)
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = pytest.mark.slow
pytestmark = [pytestmark, pytest.mark.browser]  # a real browser (Chromium): skipped where there is none
PREFIX = "/user/tester/"


@dataclass
class Hub:
    pai: Client
    jupyter: JupyterServer
    job: str

    def running(self) -> dict[str, dict[str, Any]]:
        return services_up(self.pai, self.job, ("tensorboard", "jupyter"))


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp = tmp_path_factory.mktemp("prefix")
    home: Path = tmp / "home"
    with servers(tmp) as s:
        api = s.daemon()
        job = api.submit_ok(services_job("svc", tensorboard=str(write_events(tmp / "tb")), jupyter=True))
        jupyter = s.jupyter(base_url=PREFIX)
        yield Hub(Client(home=home), jupyter, job)


def test_tensorboard_and_the_jobs_route_under_a_prefix(hub: Hub) -> None:
    hub.running()
    http = hub.jupyter.http()
    runs = wait_for(
        lambda: "run_a" in (r := http.get(task_url(hub.job, "tensorboard/data/runs"))).text and r,
        60,
        "TensorBoard to load the event file",
    )
    assert runs.json() == ["run_a"]
    page = http.get(task_url(hub.job, "tensorboard/"), headers={"Accept-Encoding": "gzip"})  # TensorBoard zips it
    assert page.status_code == 200 and "url(font-roboto/" in page.text and "url(/font-roboto/" not in page.text
    assert "Content-Encoding" not in page.headers  # unzipped to be rewritten, and sent on as it now is
    assert (
        http.get(task_url(hub.job, "tensorboard/data/runs"), headers={"Accept-Encoding": "gzip"}).headers.get(
            "Content-Encoding"
        )
        == "gzip"
    )  # data keeps its encoding
    bare = http.get(task_url(hub.job, "tensorboard"))
    assert bare.status_code == 302 and bare.headers["Location"] == f"{PREFIX}{task_url(hub.job, 'tensorboard/')}"
    task = next(j for j in http.get("pai/api/jobs").json()["jobs"] if j["id"] == hub.job)["tasks"][0]
    assert {s["name"]: s["url"] for s in task["services"]} == {  # Jupyter's button opens its Lab page
        "tensorboard": f"{PREFIX}{task_url(hub.job, 'tensorboard/')}",
        "jupyter": f"{PREFIX}{task_url(hub.job, 'jupyter/lab')}",
    }
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


def test_in_task_jupyterlab_runs_a_cell_in_a_real_browser(hub: Hub, browser: Any) -> None:
    hub.running()
    if hub.jupyter.http().get(task_url(hub.job, "jupyter/lab")).status_code == 404:
        pytest.skip("JupyterLab is not installed where the task runs")
    with opened(browser) as w:
        page = w.page
        page.goto(f"{hub.jupyter.url}{task_url(hub.job, 'jupyter/lab')}?token={hub.jupyter.token}")
        page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click(timeout=90_000)
        page.get_by_text("| Idle").first.wait_for(timeout=90_000)  # the in-task kernel is up and connected
        page.locator(".jp-Cell .cm-content").first.click(timeout=60_000)
        page.keyboard.type("6*7")
        page.keyboard.press("Shift+Enter")
        page.locator(".jp-OutputArea-output:has-text('42')").first.wait_for(timeout=60_000)
    outside = [p for p in w.paths if not ("/" + p).startswith(PREFIX)]
    assert w.paths and not outside, f"requests that missed the prefix: {outside[:5]}"
    # JupyterLab asks for the new notebook's name before creating it: those 404s are its own, not ours
    assert not [f for f in w.failed if "/api/contents/Untitled" not in f], w.failed


def test_tensorboard_dashboard_in_a_real_browser(hub: Hub, browser: Any) -> None:
    hub.running()
    with opened(browser) as w:
        w.page.goto(f"{hub.jupyter.url}{task_url(hub.job, 'tensorboard/')}?token={hub.jupyter.token}")
        w.page.get_by_text("run_a").first.wait_for(timeout=90_000)
    outside = [p for p in w.paths if not ("/" + p).startswith(PREFIX)]
    assert not outside, f"requests that missed the prefix: {outside[:5]}"
    assert not w.failed, w.failed
