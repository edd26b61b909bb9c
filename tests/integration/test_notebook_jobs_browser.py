"""Notebooks as jobs in a real JupyterLab (Chromium + Playwright, the prebuilt labextension, a real daemon whose
tasks find papermill in the task tools): right-click a notebook, "Run as PAI job" with parameters, the job page
opens; its "Executed notebook" tab shows the cells run so far while the job runs (a cell waits on a gate file)
and the rest after it ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import SHOTS, opened, pai_sidebar
from tests.helpers.notebook import Env, gated_notebook, papermill_servers

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("nbjobs-lab")
    with papermill_servers(tmp) as (s, gates):
        api = s.daemon()
        jupyter = s.jupyter(lab=True)
        yield Env(api, api, jupyter, tmp / "jupyter" / "root", gates)


def test_run_as_pai_job_and_read_the_executed_notebook_while_it_runs(env: Env, browser: Any) -> None:
    gated_notebook(env.root / "exp" / "train.ipynb")
    gate = env.gates / "lab"
    with opened(browser, shot="notebook-job-lab", viewport=(1400, 900)) as w:
        page = w.page
        pai_sidebar(page, env.jupyter, "notebook-job")
        page.locator(".jp-SideBar [data-id='filebrowser']").click()
        page.locator(".jp-DirListing-item", has_text="exp").dblclick()
        item = page.locator(".jp-DirListing-item[data-file-type='notebook']", has_text="train.ipynb")
        item.click(button="right")
        page.locator(".lm-Menu-item", has_text="Run as PAI job").click()
        page.locator(".jp-Dialog input").fill(f'{{"lr": 0.5, "epochs": 3, "gate": "{gate}"}}')
        page.locator(".jp-Dialog .jp-mod-accept").click()
        opener = page.locator(".pai-JobPage .pai-Button", has_text="Executed notebook")
        opener.wait_for(timeout=60_000)  # the job page opened, and knows a notebook job
        opener.click()
        frame = page.frame_locator("iframe.pai-ServiceFrame, .pai-ServiceFrame iframe").last
        outputs = frame.locator(".jp-OutputArea-output")  # (the cells' sources hold the same words)
        outputs.filter(has_text="lr 0.5 epochs 3 int").wait_for(timeout=90_000)  # reloaded while it runs
        assert outputs.filter(has_text="through the gate").count() == 0
        gate.touch()
        outputs.filter(has_text="through the gate").wait_for(timeout=90_000)
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "notebook-job-executed.png"))
    assert not w.dialogs, w.dialogs
