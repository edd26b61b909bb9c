"""The notebook's JobForm in a real browser across a page reload: the kernel lives on, the
page is new, and running the form's cell again at once draws the whole form, with no "model not found". The
cause (a Layout shared by every form, made before the new page) is pinned without a browser in
tests/unit/test_notebook_form.py; the race it lost here (the cell run before the page has loaded the kernel's
models) does not happen on every run, so this is the real-browser check of the whole path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.browser import open_notebook, opened, run_all_cells
from tests.helpers.jupyter_fixture import JupyterServer
from tests.helpers.servers import notebook_lab

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    code = "from pai_jupyter.notebook import JobForm\nJobForm()"
    with notebook_lab(tmp_path_factory.mktemp("nb-form-browser"), "form.ipynb", code) as server:
        yield server


def form_drawn(page: Any) -> Any:
    output = page.locator(".jp-OutputArea-output")
    output.locator(".widget-text", has_text="Job name").first.wait_for(timeout=60_000)
    output.locator(".widget-textarea", has_text="Command").first.wait_for(timeout=30_000)
    page.get_by_text("| Idle").first.wait_for(timeout=60_000)
    return output


def test_the_form_draws_again_after_a_browser_reload(lab_server: JupyterServer, browser: Any) -> None:
    with opened(browser, shot="notebook-form-reload") as w:
        page = w.page
        open_notebook(page, lab_server, "form.ipynb")
        run_all_cells(page)
        output = form_drawn(page)
        # the kernel asked the daemon off its thread: the virtual cluster turns into a select, default picked
        vc = output.locator(".widget-dropdown", has_text="Virtual cluster").locator("select")
        vc.wait_for(timeout=60_000)
        assert vc.input_value() == "default"
        page.locator(".jp-Notebook").first.click()
        page.keyboard.press("Control+s")  # saved: the page leaves without asking
        page.locator(".jp-mod-dirty").wait_for(state="detached", timeout=30_000)
        page.reload()  # the same kernel, a new page
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=90_000)
        run_all_cells(page)  # at once, as a user does: the widget manager may still be loading the kernel's models
        output = form_drawn(page)
        text = "\n".join(output.all_inner_texts())
        assert "not found" not in text and "Error displaying widget" not in text, text
        assert output.locator("input[type='text']").count() >= 5  # name, vc, gpu type, image, role name...
    assert not w.dialogs, w.dialogs
