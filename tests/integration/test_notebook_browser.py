"""The notebook side in a real browser: a user's JupyterLab (with the extension) opens a notebook that submits
a job with ``%%pai_submit --wait`` and shows ``%pai_jobs --live``; the ipywidgets render, the job shows up as
SUCCEEDED, and its log, opened from the row's actions, shows the markup the task printed as text (no element
made, no script run)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.browser import open_notebook, opened, run_all_cells
from tests.helpers.daemon import v1
from tests.helpers.jupyter_fixture import JupyterServer
from tests.helpers.servers import notebook_lab

pytestmark = pytest.mark.slow
pytestmark = [pytestmark, pytest.mark.browser]  # a real browser (Chromium): skipped where there is none
MARKUP = "<img src=x one''rror=alert(1)>"  # sh joins the quoted halves: only the log says "onerror"


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    with notebook_lab(
        tmp_path_factory.mktemp("nb-browser"),
        "jobs.ipynb",
        "%load_ext pai_jupyter",
        "%%pai_submit --wait\n" + v1("browser-hello", f"echo '{MARKUP}'"),
        "%pai_jobs --live",
    ) as server:
        yield server


def test_a_notebook_submits_and_lists_a_job_with_live_widgets(lab_server: JupyterServer, browser: Any) -> None:
    with opened(browser) as w:
        page = w.page
        open_notebook(page, lab_server, "jobs.ipynb")
        run_all_cells(page)
        grid = page.locator(".widget-gridbox")
        grid.get_by_text("browser-hello").first.wait_for(timeout=90_000)
        grid.get_by_text("SUCCEEDED").first.wait_for(timeout=30_000)
        page.locator(".widget-toggle-button", has_text="RUNNING").first.wait_for(timeout=10_000)  # the filters
        outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
        assert any("SUCCEEDED" in text for text in outputs), outputs  # %%pai_submit --wait's last status
        grid.locator("select").first.select_option("logs")  # the row's actions: its log in a LogViewer
        page.get_by_text("onerror=alert(1)").first.wait_for(timeout=30_000)  # shown as text...
        assert page.locator("img[src='x']").count() == 0  # ...never as an element
    assert not w.dialogs, w.dialogs
    # lsp/ and server-proxy/: lab frontends of server extensions the fixture turns off (not ours)
    assert not [f for f in w.failed if not any(p in f for p in ("/lsp/", "/server-proxy/"))], w.failed
