"""A cell run while a "Python on PAI" kernel starts is queued and runs (headless Chromium, a real
Jupyter server with JupyterLab, the embedded cluster). Its own server: the culling that test_kernel_lab.py
configures would end a kernel that waits for resources before the cell could run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import new_notebook_from_launcher, opened
from tests.helpers.daemon import Api, provisioner_installed, v1
from tests.helpers.jupyter_fixture import JupyterServer
from tests.helpers.kernel import install_spec
from tests.helpers.servers import servers

from ..polling import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture
def lab_server(tmp_path: Path) -> Iterator[tuple[JupyterServer, Api]]:
    provisioner_installed()
    data = tmp_path / "jupyter-data"
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_DATA_DIR", str(data))
    mp.setenv("JUPYTER_PATH", str(data))
    with servers(tmp_path) as s:
        api = s.daemon()
        install_spec("pai-lab", display="Python 3 on PAI (lab test)")
        yield s.jupyter(lab=True), api
    mp.undo()


def test_a_cell_run_while_the_pai_kernel_starts_is_queued_and_runs(
    lab_server: tuple[JupyterServer, Api], browser: Any
) -> None:
    """Lab's session request waited for the kernel's job to run; a cell run meanwhile (the notebook
    open, its kernel starting) found no kernel and was dropped: never [*], no output. With pending kernels (the
    server extension turns them on) the session has its kernel at once and Lab queues the cell until it is ready. A job
    holding every CPU keeps the kernel's job waiting, so the cell is surely run while it starts."""
    server, api = lab_server
    cpus = api.http.get("/api/v2/info").json()["capacity"]["cpu"]
    blocker = api.submit_ok(v1("lab-blocker", "sleep 300", cpuNumber=cpus))
    try:
        with opened(browser, shot="kernel-queue") as w:
            page = w.page
            new_notebook_from_launcher(page, server, "Python 3 on PAI (lab test)")
            editor = page.locator(".jp-Cell .cm-content").first
            editor.wait_for(timeout=60_000)
            # the notebook's session, whose request used to wait for the kernel's job to run (Lab runs no cell
            # before it has a session, for any kernel: a cell run in the moment before is dropped by Lab itself)
            wait_for(lambda: server.http().get("api/sessions").json(), 30, "the notebook's session")
            page.get_by_text("| Connecting").first.wait_for(timeout=30_000)
            editor.click()
            page.keyboard.type("import os; 'ran in ' + os.environ['PAI_JOB_NAME']")
            page.keyboard.press("Shift+Enter")  # the kernel's job waits for the blocker's CPUs
            page.locator(".jp-InputPrompt", has_text="[*]").first.wait_for(timeout=30_000)  # queued
            api.stop(blocker)
            page.locator(".jp-OutputArea-output", has_text="ran in Untitled").first.wait_for(timeout=120_000)
            assert not w.dialogs, w.dialogs
    finally:
        api.stop(blocker)


def test_a_pai_kernel_that_cannot_start_still_says_why_in_lab(
    lab_server: tuple[JupyterServer, Api], browser: Any
) -> None:
    """With pending kernels the session request no longer fails on a start error: Lab shows the dead kernel's reason
    (the provisioner's message) in its "Error Starting Kernel" dialog, as it showed the failed request's before."""
    server, _api = lab_server
    install_spec("pai-huge", display="Python 3 on PAI (too big)", cpu=64)  # the test daemon has 8 CPUs
    with opened(browser) as w:
        page = w.page
        new_notebook_from_launcher(page, server, "Python 3 on PAI (too big)")
        dialog = page.locator(".jp-Dialog-content", has_text="can never run here").first
        dialog.wait_for(timeout=60_000)
        assert "64" in dialog.inner_text()
