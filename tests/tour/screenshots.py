"""The tour's screenshots, light and dark: a real daemon and JupyterLab with the built extension, a two-role job
with TensorBoard and a job waiting behind it, then the sidebar (capacity open), the job page with its task table
and charts, the submit form in basic and pro mode and the waiting queue, in each theme, as PNGs in OUTDIR.

    python -m tests.tour.screenshots OUTDIR

For a person to look at (nothing is asserted beyond the pages loading); needs Debian's chromium and Playwright
(the test extra), as the browser tests do."""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.helpers.browser import CHROMIUM, CHROMIUM_FLAGS, pai_sidebar, run_from_palette
from tests.helpers.jupyter_fixture import write_events
from tests.helpers.servers import servers

PLUGINS = "com.microsoft.pai.runtimeplugin"
TRAIN = "tour-train"


def role(name: str, command: str, cpu: int = 1, instances: int = 1) -> dict[str, Any]:
    return {
        "name": name,
        "taskNumber": instances,
        "cpuNumber": cpu,
        "memoryMB": 512,
        "gpuNumber": 0,
        "command": command,
    }


def training(logdir: Path) -> str:
    """Two roles (a chief and two workers) that keep busy, so the charts have lines; TensorBoard over ``logdir``."""
    busy = "while true; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.2; done"
    return json.dumps(
        {
            "jobName": TRAIN,
            "image": "pai-test/busybox:latest",
            "virtualCluster": "default",
            "extras": {PLUGINS: [{"plugin": "tensorboard", "parameters": {"logdir": str(logdir)}}]},
            "taskRoles": [role("chief", busy), role("worker", busy, instances=2)],
        }
    )


def waiting(cpu: int) -> str:
    return json.dumps(
        {"jobName": "tour-waits", "image": "pai-test/busybox:latest", "taskRoles": [role("main", "true", cpu)]}
    )


def theme(page: Any, name: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^JupyterLab {name.title()}$")).click()
    light = "true" if name == "light" else "false"
    page.locator(f"body[data-jp-theme-light='{light}']").wait_for(state="attached", timeout=30_000)
    page.wait_for_timeout(1500)  # the theme's CSS applied, a few more samples drawn


def tab(page: Any, label: str) -> None:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=label).first.click()


def shoot(page: Any, out: Path, name: str) -> None:
    """Each view in this theme: the sidebar, the job page and its charts, the form (basic, pro), the queue."""
    page.screenshot(path=str(out / f"lab-{name}.png"))
    page.locator("#pai-jobs-panel").screenshot(path=str(out / f"sidebar-{name}.png"))
    tab(page, TRAIN)
    job = page.locator(".pai-JobPage:not(.lm-mod-hidden)")
    job.evaluate("p => p.scrollTo(0, 0)")  # as it opens: the other theme's chart shot scrolled it
    job.screenshot(path=str(out / f"jobpage-{name}.png"))
    job.locator(".pai-Metrics").screenshot(path=str(out / f"charts-{name}.png"))
    tab(page, "New PAI job")
    form = page.locator(".pai-Form:not(.lm-mod-hidden)")
    pro = form.get_by_label("Pro mode")
    pro.uncheck()
    page.screenshot(path=str(out / f"form-basic-{name}.png"))
    pro.check()
    page.screenshot(path=str(out / f"form-pro-{name}.png"))
    tab(page, "PAI queue")
    page.screenshot(path=str(out / f"queue-{name}.png"))


def main(out: Path) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pai-tour-") as tmp, servers(Path(tmp)) as s:
        (s.home / "local").mkdir(parents=True)
        (s.home / "local" / "cluster.yaml").write_text("virtualClusters:\n  research: {cpu: 2, memoryMB: 2048}\n")
        api = s.daemon(cpus=4)
        train = api.submit_ok(training(write_events(Path(tmp) / "tb")))
        api.wait(train, ("RUNNING",), timeout=60)
        api.wait(api.submit_ok(waiting(cpu=4)), ("WAITING",), timeout=30)
        jupyter = s.jupyter(lab=True)
        settings = Path(tmp) / "jupyter" / "config" / "lab" / "user-settings" / "pai-jupyter"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"refreshSeconds": 1}))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            panel = pai_sidebar(page, jupyter, "tour")
            news = page.get_by_role("button", name="No", exact=True)
            news.wait_for(timeout=10_000)
            news.click()  # Lab's "official Jupyter news?" toast
            capacity = panel.locator(".pai-Capacity")
            capacity.locator("summary").click()
            capacity.locator(".pai-Capacity-vc").first.wait_for(timeout=30_000)
            panel.locator(".pai-JobRow", has_text=TRAIN).click()
            job = page.locator(".pai-JobPage").filter(has_text=train)
            job.locator(".pai-Tasks td", has_text="worker").first.wait_for(timeout=30_000)
            page.wait_for_function(  # a line with some history
                "() => (document.querySelector(\".pai-Chart[data-measure='cpu'] polyline\")?.points.length || 0) >= 20",
                timeout=90_000,
            )
            panel.get_by_role("button", name="New PAI job").click()
            page.locator(".pai-Form").get_by_label("Job name", exact=True).wait_for(timeout=30_000)
            run_from_palette(page, "Show PAI waiting queue", ".pai-QueueView")
            page.locator(".pai-QueueView .pai-QueueRow").first.wait_for(timeout=30_000)
            for name in ("light", "dark"):
                theme(page, name)
                shoot(page, out, name)
            browser.close()
    print("\n".join(sorted(str(f) for f in out.glob("*.png"))))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tests.tour.screenshots OUTDIR")
    main(Path(sys.argv[1]))
