"""In a real browser (JupyterLab): the JobForm's labels are not cut, Import draws the role's tab
at once and its button says a file was taken; the ResourceMonitor's lines stay under the top of their charts,
its time labels do not overlap, and after the job ended it keeps the samples and sums them up. Screenshots go
to $PAI_SCREENSHOTS when set (to look at the polish)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import open_notebook, opened, run_all_cells
from tests.helpers.jupyter_fixture import JupyterServer
from tests.helpers.servers import notebook_lab

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

MONITOR = """
from pai_jupyter.notebook.monitor import MIB, ResourceMonitor
t0 = 1_700_000_000_000
samples = [{"time": t0 + i * 2000, "gpu": {"available": False, "message": "no NVML here"},
            "tasks": [{"role": "main", "index": 0, "state": "RUNNING", "cpuPercent": 95.0 + i % 5,
                       "memoryBytes": min(52, 10 + 2 * i) * MIB, "gpus": []}]} for i in range(40)]
samples.append({"time": t0 + 80_000, "gpu": {"available": False}, "tasks": [
    {"role": "main", "index": 0, "state": "SUCCEEDED", "cpuPercent": None, "memoryBytes": None, "gpus": []}]})
feed = iter(samples)
monitor = ResourceMonitor("demo~job", source=lambda job: next(feed), interval=0.2)
monitor
"""


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    form = "from pai_jupyter.notebook import JobForm\nform = JobForm()\nform"
    tmp = tmp_path_factory.mktemp("newcomer-browser")
    with notebook_lab(tmp, "widgets.ipynb", form, MONITOR, daemon=False) as server:
        yield server


def _shot(page: Any, locator: Any, name: str) -> None:
    folder = os.environ.get("PAI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        locator.screenshot(path=str(Path(folder) / f"{name}.png"))


def test_form_and_monitor_render_without_cut_labels_or_crowded_axes(
    lab_server: JupyterServer, browser: Any, tmp_path: Path
) -> None:
    with opened(browser, viewport=(1400, 2400)) as w:
        page = w.page
        open_notebook(page, lab_server, "widgets.ipynb")
        run_all_cells(page)
        form = page.locator(".jp-OutputArea-output").first
        form.get_by_text("Max run time (minutes").first.wait_for(timeout=90_000)
        for label in form.locator(".widget-label").all():  # no field label cut either
            if label.is_visible():
                assert label.evaluate("b => b.scrollWidth <= b.clientWidth + 1"), label.inner_text()

        # Import: the role's tab shows the file's command at once, the button says a file was taken
        job = tmp_path / "imported.json"
        doc = json.loads((ROOT / "notebooks/jobs/hello-world.json").read_text())
        job.write_text(json.dumps(doc))
        with page.expect_file_chooser() as chooser:
            form.locator(".widget-upload").click()
        chooser.value.set_files(str(job))
        form.get_by_text("imported").first.wait_for(timeout=30_000)
        _shot(page, form, "after-import")
        command = form.locator(".widget-tab .widget-textarea textarea").first
        command.wait_for(state="visible", timeout=10_000)
        assert command.input_value() == doc["taskRoles"][0]["command"]
        assert form.locator(".widget-upload").inner_text().strip() == "Import (1)"

        form.locator("button", has_text="Submit").first.click()
        confirm = form.locator("button", has_text="Confirm and submit").first
        confirm.wait_for(timeout=10_000)
        for button in form.locator("button").all():
            if button.is_visible():  # no label cut to "Confirm and sub…"
                assert button.evaluate("b => b.scrollWidth <= b.clientWidth + 1"), button.inner_text()
        _shot(page, form, "jobform")

        monitor = page.locator(".jp-OutputArea-output").nth(1)
        monitor.get_by_text("Resource usage after the job ended").first.wait_for(timeout=60_000)
        _shot(page, monitor, "monitor")
        memory = monitor.locator(".bqplot").nth(1)
        lines = memory.locator("g.curve path.line").first
        plot = memory.locator("rect.plotarea_background").first
        line_top = lines.bounding_box()["y"]
        plot_top = plot.bounding_box()["y"]
        assert line_top - plot_top > 10, (line_top, plot_top)  # headroom: the line is not on the top border
        ticks = memory.locator(".axis").first.locator(".tick text").all_inner_texts()
        assert 2 <= len(ticks) <= 5, ticks
        boxes = [t.bounding_box() for t in memory.locator(".axis").first.locator(".tick text").all()]
        for a, b in itertools.pairwise(boxes):
            assert a["x"] + a["width"] <= b["x"], ticks  # time labels do not overlap
        assert "52.0 MiB" in monitor.inner_text()
    assert not w.dialogs, w.dialogs
