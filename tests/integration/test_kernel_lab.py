"""The PAI kernel in a real Jupyter server: JupyterLab's launcher shows the kernelspec with its logo and a notebook
started from it runs in a PAI job and restarts in it (headless Chromium); Jupyter's idle culling shuts an
unconnected PAI kernel down and its job is STOPPED with no process behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import opened
from tests.helpers.daemon import Api, provisioner_installed
from tests.helpers.jupyter_fixture import JupyterServer
from tests.helpers.kernel import install_spec, job_processes
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = pytest.mark.slow
pytestmark = [pytestmark, pytest.mark.browser]  # a real browser (Chromium): skipped where there is none
CULL = "c.MappingKernelManager.cull_idle_timeout = 4\nc.MappingKernelManager.cull_interval = 1\n"


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, Api]]:
    provisioner_installed()
    tmp = tmp_path_factory.mktemp("kernel-lab")
    data = tmp / "jupyter-data"
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_DATA_DIR", str(data))  # the server inherits them: it sees the kernelspec installed here
    mp.setenv("JUPYTER_PATH", str(data))
    with servers(tmp) as s:
        api = s.daemon()
        install_spec("pai-lab", display="Python 3 on PAI (lab test)")
        (tmp / "jupyter" / "config").mkdir(parents=True)
        (tmp / "jupyter" / "config" / "jupyter_server_config.py").write_text(CULL)  # beside the fixture's json
        server = s.jupyter(lab=True)
        yield server, api
        mp.undo()


def test_the_launcher_shows_the_pai_kernel_and_a_notebook_runs_and_restarts_in_a_job(
    lab_server: tuple[JupyterServer, Api], browser: Any
) -> None:
    server, api = lab_server
    with opened(browser) as w:
        page = w.page
        page.goto(f"{server.url}lab?token={server.token}")
        card = page.locator(".jp-LauncherCard", has_text="Python 3 on PAI (lab test)").first
        card.wait_for(timeout=90_000)
        logo = card.locator(".jp-LauncherCard-icon img")  # the kernelspec's logo, not a plain letter
        wait_for(lambda: logo.evaluate("i => i.complete && i.naturalWidth > 0") or None, 30, "the PAI logo drawn")
        assert (logo.get_attribute("src") or "").endswith("/logo-svg.svg")
        assert card.locator(".jp-LauncherCard-noKernelIcon").count() == 0
        card.click()
        page.get_by_text("| Idle").first.wait_for(timeout=120_000)
        editor = page.locator(".jp-Cell .cm-content").first
        editor.click()
        page.keyboard.type("import os; x = 1; os.environ['PAI_JOB_NAME'] + '|' + os.getcwd()")
        page.keyboard.press("Shift+Enter")
        out = page.locator(".jp-OutputArea-output", has_text="-kernel-").first
        out.wait_for(timeout=60_000)
        job_name, cwd = out.inner_text().strip().strip("'").split("|")
        # Lab's own restart: the same job, a fresh kernel
        page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Restart Kernel…").first.click()
        page.locator(".jp-Dialog-button", has_text="Restart").first.click()
        page.get_by_text("| Idle").first.wait_for(timeout=120_000)
        page.locator(".jp-Cell .cm-content").last.click()
        page.keyboard.type("import os; ('x' in globals(), os.environ['PAI_JOB_NAME'])")
        page.keyboard.press("Shift+Enter")
        page.locator(".jp-OutputArea-output", has_text=f"(False, '{job_name}')").first.wait_for(timeout=60_000)
    assert job_name.startswith("Untitled-kernel-")  # named after the notebook
    assert cwd == str(Path(server.log).parent / "root")  # the notebook's directory
    user = api.http.get("/api/v2/info").json()["user"]
    assert api.detail(f"{user}~{job_name}")["jobStatus"]["state"] == "RUNNING"
    assert not w.dialogs, w.dialogs


def test_idle_culling_stops_the_kernels_job(lab_server: tuple[JupyterServer, Api]) -> None:
    server, api = lab_server
    http = server.http()
    user = api.http.get("/api/v2/info").json()["user"]

    def jobs() -> dict[str, str]:  # a kernel started without a notebook or folder: notebook-kernel-<hex>
        body = api.http.get("/api/v2/jobs", params={"username": user}).json()
        return {
            j["name"]: j["state"]
            for j in (body["data"] if isinstance(body, dict) else body)
            if j["name"].startswith("notebook-kernel-")
        }

    before = set(jobs())
    r = http.post("api/kernels", json={"name": "pai-lab"})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["id"]
    job = wait_for(
        lambda: [n for n, s in jobs().items() if n not in before and s == "RUNNING"],
        timeout=60,
        what="the kernel's job to run",
    )[0]
    wait_for(
        lambda: kernel_id not in [k["id"] for k in http.get("api/kernels").json()],
        timeout=120,
        what="the idle PAI kernel to be culled",
    )
    wait_for(lambda: jobs()[job] == "STOPPED", timeout=60, what="the culled kernel's job to be STOPPED")
    assert not job_processes(job)
    assert "Culling kernel" in server.log_text() and kernel_id in server.log_text()
