"""The Lab's job page, sidebar and charts in a real browser: log
Follow after the page was hidden, Stop that asks and turns off once the job ended, Clone that asks the copy's name,
"Clone to form" of a two-role job in pro mode with the roles named, an SSH dialog whose command logs in as shown,
kernel jobs by their notebook (ended ones hidden or cleared), row facts that are never cut, charts with axes,
units and task names, icons on every PAI tab, and the cluster capacity view. ``PAI_LOOK_SHOTS=DIR`` also saves
screenshots of the sidebar, the job page and its charts in the light and dark themes there."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import open_lab_page
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import JupyterServer, services_job, write_events
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = pytest.mark.slow
COUNTING = 'i=0; while true; do echo "line $i of a log that keeps growing"; i=$((i+1)); sleep 0.05; done'


@dataclass
class Env:
    api: Api
    jupyter: JupyterServer
    live: str  # keeps running, with TensorBoard: its charts fill


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("lab-look")
    with servers(tmp) as s:
        api = s.daemon()
        live = api.submit_ok(services_job("look-live", tensorboard=str(write_events(tmp / "tb"))))
        jupyter = s.jupyter(lab=True, lab_settings={"refreshSeconds": 1})
        yield Env(api, jupyter, live)


@pytest.fixture
def lab_page(env: Env, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A Lab page with the PAI sidebar open in a fresh layout; a screenshot on failure."""
    yield from open_lab_page(browser, env.jupyter, request)


def row(page: Any, name: str) -> Any:
    return page.locator("#pai-jobs-panel .pai-JobRow").filter(has=page.locator(".pai-JobRow-name", has_text=name))


def job_page(lab_page: Any, env: Env, name: str) -> Any:
    r = row(lab_page, name)
    r.wait_for(timeout=60_000)
    r.click()
    page = lab_page.locator(".pai-JobPage").filter(has_text=f"root~{name}")
    page.locator(".pai-Tasks td", has_text="main").first.wait_for(timeout=30_000)
    return page


def dialog(lab_page: Any) -> Any:
    d = lab_page.locator(".jp-Dialog")
    d.wait_for(timeout=10_000)
    return d


LOG_AT_END = """([before]) => {
  const pre = document.querySelector('.pai-JobPage:not(.lm-mod-hidden) .pai-LogText');
  if (!pre || pre.clientHeight === 0 || pre.textContent === before) return false;
  return pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
}"""


def test_log_follow_goes_on_after_the_page_was_hidden(env: Env, lab_page: Any) -> None:
    env.api.submit_ok(services_job("look-follow", command=COUNTING))
    page = job_page(lab_page, env, "look-follow")
    log = page.locator(".pai-LogText")
    log.filter(has_text="line 120 of").wait_for(timeout=60_000)  # longer than the box: it scrolls
    lab_page.wait_for_function(LOG_AT_END, arg=[""], timeout=30_000)
    lab_page.locator("#pai-jobs-panel").get_by_role("button", name="New PAI job").click()  # another tab hides it
    lab_page.locator(".pai-Form").last.wait_for(timeout=30_000)
    assert not page.is_visible()
    seen = log.text_content()
    lab_page.wait_for_function(
        "([seen]) => document.querySelector('.pai-LogText').textContent !== seen", arg=[seen], timeout=30_000
    )  # it kept loading while hidden
    lab_page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="look-follow").click()
    page.wait_for(state="visible", timeout=10_000)
    shown = log.text_content()
    lab_page.wait_for_function(LOG_AT_END, arg=[shown], timeout=30_000)  # new lines, and the view on the newest


def test_stop_asks_first_and_is_off_once_the_job_ended_and_clone_asks_the_name(env: Env, lab_page: Any) -> None:
    job = env.api.submit_ok(services_job("look-stop"))
    env.api.wait(job, ("RUNNING",), timeout=60)
    page = job_page(lab_page, env, "look-stop")
    # a silent running task's log says more is to come, not "(empty)"
    log = page.locator(".pai-LogText")
    log.filter(has_text="(no output yet: it shows here as the task writes it)").wait_for(timeout=30_000)
    stop = page.get_by_role("button", name="Stop this job")
    stop.click()
    d = dialog(lab_page)
    assert "Stop root~look-stop?" in d.inner_text()
    d.get_by_role("button", name="Cancel").click()
    d.wait_for(state="detached", timeout=10_000)
    assert env.api.detail(job)["jobStatus"]["state"] == "RUNNING"  # nothing sent
    stop.click()
    dialog(lab_page).get_by_role("button", name="Stop").click()
    page.locator(".pai-Summary .pai-Badge", has_text="STOPPED").wait_for(timeout=60_000)
    log.filter(has_text="(the task wrote no output)").wait_for(timeout=30_000)  # its last lines, once it ended
    wait_for(stop.is_disabled, 10, "the Stop button of an ended job turns off")
    # Clone: the copy's name is asked (a free one proposed), then it is submitted under that name
    page.get_by_role("button", name="Clone this job").click()
    d = dialog(lab_page)
    name = d.get_by_label("Name of the copy")
    assert name.input_value() == "look-stop-copy"
    name.fill("look-stop-again")
    d.get_by_role("button", name="Clone").click()
    row(lab_page, "look-stop-again").wait_for(timeout=30_000)
    assert env.api.detail("root~look-stop-again")["jobStatus"]["state"] in ("WAITING", "RUNNING")
    env.api.stop("root~look-stop-again")
    assert "look-stop-copy" not in env.api.http.get("/api/v2/jobs").text  # no copy under a generated name


def test_clone_to_form_of_two_roles_opens_pro_mode_with_the_roles_named(env: Env, lab_page: Any) -> None:
    role = {"taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "echo hi"}
    doc = {
        "jobName": "look-roles",
        "image": "pai-test/busybox:latest",
        "taskRoles": [{"name": "chief", **role}, {"name": "worker", **role}],
    }
    job = env.api.submit_ok(json.dumps(doc))
    env.api.wait(job, timeout=60)
    r = row(lab_page, "look-roles")
    r.wait_for(timeout=60_000)
    r.click()
    page = lab_page.locator(".pai-JobPage").filter(has_text=job)
    page.locator(".pai-Tasks td", has_text="worker").first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Open this job in the submit form").click()
    form = lab_page.locator(".pai-Form").last
    form.get_by_label("Job name").wait_for(timeout=30_000)
    assert form.get_by_label(re.compile(r"Pro mode \(several task roles")).is_checked()
    names = form.get_by_label("Role name")
    assert [names.nth(i).input_value() for i in range(names.count())] == ["chief", "worker"]


def test_the_ssh_dialog_gives_a_command_that_logs_in(env: Env, lab_page: Any) -> None:
    from tests.helpers.ssh import need_sshd

    need_sshd()
    doc = json.loads(services_job("look-ssh"))
    doc["extras"] = {"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh", "parameters": {"jobssh": True}}]}
    job = env.api.submit_ok(json.dumps(doc))
    env.api.wait(job, ("RUNNING",), timeout=60)
    r = row(lab_page, "look-ssh")
    r.locator(".pai-Badge", has_text="RUNNING").wait_for(timeout=60_000)
    r.get_by_role("button", name="Actions for look-ssh").click()
    lab_page.locator(".pai-RowMenu .lm-Menu-itemLabel", has_text="SSH of main[0]").click()  # did nothing before
    d = dialog(lab_page)
    command = d.get_by_label("ssh", exact=True)
    command.wait_for(timeout=60_000)
    text = command.inner_text()
    assert re.search(r"-p \d+ .*\S+@127\.0\.0\.1$", text), text
    assert d.get_by_label("pai ssh", exact=True).inner_text() == f"pai ssh {job} --role main --index 0"
    assert re.search(r"host 127\.0\.0\.1 · port \d+ · user \S+", d.inner_text())
    d.get_by_role("button", name="Close").click()
    argv = shlex.split(text)
    argv[1:1] = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]

    def logs_in() -> str | None:
        out = subprocess.run([*argv, "echo", "in-the-task"], capture_output=True, text=True, timeout=30)
        return out.stdout if out.returncode == 0 else None

    assert "in-the-task" in wait_for(logs_in, 60, "the ssh command the dialog shows logs in")
    page = job_page(lab_page, env, "look-ssh")  # the job page's tools offer the same dialog
    page.get_by_role("button", name=f"How to log in to {job} with ssh").click()
    dialog(lab_page).get_by_label("ssh", exact=True).wait_for(timeout=30_000)
    dialog(lab_page).get_by_role("button", name="Close").click()
    env.api.stop(job)


def test_kernel_jobs_show_their_notebook_and_ended_ones_can_be_hidden_and_cleared(env: Env, lab_page: Any) -> None:
    live = env.api.submit_ok(services_job("analysis-kernel-0a0b0c"))
    ended = env.api.submit_ok(services_job("Untitled-kernel-1a2b3c", command="true"))
    env.api.wait(ended, timeout=60)
    env.api.wait(live, ("RUNNING",), timeout=60)
    panel = lab_page.locator("#pai-jobs-panel")
    row(lab_page, "analysis.ipynb · kernel").wait_for(timeout=30_000)
    hide = panel.get_by_label("Hide ended kernels")
    assert hide.is_checked()
    # (a refresh from before it ended shows it as running, not ended, until the next one)
    row(lab_page, "Untitled.ipynb").wait_for(state="detached", timeout=30_000)
    hide.uncheck()
    row(lab_page, "Untitled.ipynb · kernel").wait_for(timeout=10_000)
    panel.get_by_role("button", name="Delete the ended kernel jobs").click()
    d = dialog(lab_page)
    assert "Delete 1 ended" in d.inner_text()
    d.get_by_role("button", name="Delete").click()
    row(lab_page, "Untitled.ipynb").wait_for(state="detached", timeout=30_000)
    assert env.api.http.get(f"/api/v2/jobs/{ended}").status_code == 404
    assert row(lab_page, "analysis.ipynb · kernel").count() == 1  # a running kernel stays
    row(lab_page, "analysis.ipynb · kernel").click()  # its page's tab: the notebook's name too
    lab_page.get_by_role("tab", name="analysis.ipynb · kernel").wait_for(timeout=30_000)
    env.api.stop(live)


CUT = """() => [...document.querySelectorAll('#pai-jobs-panel .pai-JobRow-meta')].flatMap(meta => {
  const box = meta.getBoundingClientRect();
  return [...meta.children]
    .filter(s => !s.classList.contains('pai-JobRow-submitted'))
    .filter(s => s.getBoundingClientRect().right > box.right + 0.5)
    .map(s => s.textContent);
})"""


def test_row_facts_are_never_cut_in_the_sidebar(env: Env, lab_page: Any) -> None:
    row(lab_page, "look-live").wait_for(timeout=60_000)
    lab_page.locator("#pai-jobs-panel .pai-JobRow-duration").first.wait_for(timeout=30_000)
    assert lab_page.evaluate(CUT) == []


TICKS = """(measure) => [...document.querySelectorAll(
  `.pai-JobPage:not(.lm-mod-hidden) .pai-Chart[data-measure="${measure}"] .pai-Chart-tick`)].map(t => t.textContent)"""


def test_the_charts_have_axes_units_and_the_tasks_name_and_tabs_have_icons(env: Env, lab_page: Any) -> None:
    env.api.wait(env.live, ("RUNNING",), timeout=60)
    page = job_page(lab_page, env, "look-live")
    cpu = page.locator(".pai-Chart[data-measure='cpu']")
    cpu.locator("polyline[data-series='main[0]']").wait_for(state="attached", timeout=60_000)
    assert "main[0]" in cpu.locator("figcaption").inner_text()
    y = lab_page.evaluate(TICKS, "cpu")
    assert y[0] == "0 %" and all(t.endswith("%") or t == "now" or t.endswith(" s") for t in y), y
    assert "now" in y and any(re.fullmatch(r"-\d+ s", t) for t in y), y  # the x axis: seconds before now
    mem = lab_page.evaluate(TICKS, "mem")
    assert any(re.fullmatch(r"\d+(\.\d)? (KiB|MiB|GiB)", t) for t in mem), mem
    tab = lab_page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="look-live")
    assert tab.locator(".lm-TabBar-tabIcon svg").count() == 1
    page.get_by_role("button", name="Terminal of main[0] of look-live").click()
    terminal = lab_page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Terminal: main[0]")
    terminal.wait_for(timeout=30_000)
    assert terminal.locator(".lm-TabBar-tabIcon svg").count() == 1  # no icon before
    shots = os.environ.get("PAI_LOOK_SHOTS")
    if shots:
        save_shots(lab_page, Path(shots))


HEIGHTS = """(page) => [...page.querySelectorAll('.pai-JobTools input, .pai-Logs select, .pai-Row .pai-Button')]
  .map(e => [e.getAttribute('aria-label') || e.textContent, Math.round(e.getBoundingClientRect().height)])"""


def test_the_job_page_opens_at_the_top_its_controls_lab_styled_at_one_height(env: Env, lab_page: Any) -> None:
    env.api.wait(env.live, ("RUNNING",), timeout=60)
    page = job_page(lab_page, env, "look-live")
    page.locator(".pai-Chart[data-measure='cpu'] polyline").first.wait_for(state="attached", timeout=60_000)
    assert page.evaluate("p => p.scrollTop") == 0  # the log and charts loaded, the page still at its top
    heights = page.evaluate(HEIGHTS)
    assert len(heights) >= 6 and len({h for _, h in heights}) == 1, heights  # minutes, set, selects, tail, full log
    for select in page.locator("select").all():  # Lab's drop-down caret beside each select
        assert select.locator("xpath=following-sibling::*[contains(@class, 'pai-Select-caret')]").count() == 1
    tail = page.get_by_role("button", name="Show the log tail")
    assert "jp-mod-styled" in (tail.get_attribute("class") or "")


def save_shots(lab_page: Any, to: Path) -> None:
    """The sidebar (capacity open), the job page and its charts, in the light and the dark theme."""
    to.mkdir(parents=True, exist_ok=True)
    lab_page.get_by_role("tab", name="look-live", exact=True).click()
    capacity = lab_page.locator(".pai-Capacity")
    if not capacity.evaluate("d => d.open"):
        capacity.locator("summary").click()
    capacity.locator(".pai-Capacity-vc").first.wait_for(timeout=30_000)
    news = lab_page.get_by_role("button", name="No", exact=True)
    if news.count():
        news.click()  # Lab's "official Jupyter news?" toast, over the charts
    lab_page.wait_for_function(  # a line with some history
        "() => (document.querySelector(\".pai-Chart[data-measure='mem'] polyline\")?.points.length || 0) >= 20",
        timeout=60_000,
    )
    for theme, light in (("light", "true"), ("dark", "false")):
        lab_page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
        lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^JupyterLab {theme.title()}$")).click()
        lab_page.locator(f"body[data-jp-theme-light='{light}']").wait_for(state="attached", timeout=30_000)
        lab_page.wait_for_timeout(1500)  # the theme's CSS and a few more samples drawn
        lab_page.screenshot(path=str(to / f"lab-{theme}.png"))
        lab_page.locator("#pai-jobs-panel").screenshot(path=str(to / f"sidebar-{theme}.png"))
        page = lab_page.locator(".pai-JobPage:not(.lm-mod-hidden)")
        page.screenshot(path=str(to / f"jobpage-{theme}.png"))
        page.locator(".pai-Metrics").screenshot(path=str(to / f"charts-{theme}.png"))
    lab_page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Light$")).click()


def test_the_capacity_view_shows_use_per_virtual_cluster_and_why_a_job_waits(env: Env, lab_page: Any) -> None:
    env.api.wait(env.live, ("RUNNING",), timeout=60)
    quota = env.api.http.get("/api/v2/virtual-clusters").json()["default"]["resourcesTotal"]["cpu"]
    big = json.loads(services_job("look-waits"))
    big["taskRoles"][0]["cpuNumber"] = quota  # more than is free while look-live runs
    job = env.api.submit_ok(json.dumps(big))
    env.api.wait(job, ("WAITING",), timeout=30)
    panel = lab_page.locator("#pai-jobs-panel")
    panel.locator(".pai-Capacity summary", has_text="Cluster capacity").click()
    vc = panel.locator(".pai-Capacity-vc[data-vc='default']")
    cpu = vc.locator(".pai-Capacity-row[data-resource='cpu'] .pai-Capacity-text")
    cpu.wait_for(timeout=30_000)
    assert re.fullmatch(rf"\d+(\.\d)? / {quota} CPUs", cpu.inner_text()), cpu.inner_text()
    assert re.fullmatch(
        r"[\d.]+ / [\d.]+ GiB", vc.locator("[data-resource='memoryMB'] .pai-Capacity-text").inner_text()
    )
    waiting = panel.locator(".pai-Capacity-list li", has_text="look-waits")
    waiting.wait_for(timeout=30_000)
    reason = env.api.detail(job)["jobStatus"].get("waitingReason") or ""
    assert reason and reason[:30] in waiting.inner_text(), (reason, waiting.inner_text())
    env.api.stop(job)
    waiting.wait_for(state="detached", timeout=30_000)  # the view follows the sidebar's refresh


def test_an_ended_jobs_tensorboard_button_serves_its_logs(env: Env, lab_page: Any, tmp_path: Path) -> None:
    logdir = write_events(tmp_path / "tb")
    job = env.api.submit_ok(services_job("look-ended-tb", command="true", tensorboard=str(logdir)))
    assert env.api.wait(job, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
    r = row(lab_page, "look-ended-tb")
    r.locator(".pai-Badge", has_text="SUCCEEDED").wait_for(timeout=60_000)
    r.click()
    page = lab_page.locator(".pai-JobPage").filter(has_text=job)
    page.get_by_role("button", name="TensorBoard of main[0] of look-ended-tb").click()  # none once it ended
    frame = lab_page.frame_locator(".pai-ServiceFrame iframe").last
    frame.get_by_text("loss").first.wait_for(timeout=120_000)
    frame.locator("scalar-card line-chart").first.wait_for(timeout=60_000)


def test_the_desktop_tab_draws_without_a_click(env: Env, lab_page: Any) -> None:
    from tests.helpers.desktop import count_colors, desktop_job, need_desktop

    need_desktop()
    job = env.api.submit_ok(desktop_job("look-desk"))
    env.api.wait(job, ("RUNNING",), timeout=60)
    page = job_page(lab_page, env, "look-desk")
    page.get_by_role("button", name="Remote desktop of main[0]").click()
    tab = lab_page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Desktop: main[0]")
    tab.wait_for(timeout=30_000)
    assert tab.locator(".lm-TabBar-tabIcon svg").count() == 1  # no icon before
    frame = lab_page.frame_locator(".pai-ServiceFrame iframe").last
    frame.locator("body[data-state=connected]").wait_for(state="attached", timeout=90_000)
    canvas = frame.locator("#screen canvas")
    wait_for(lambda: count_colors(canvas.screenshot()) > 2, 60, "a desktop drawn on the canvas with no click")
    env.api.stop(job)


def test_the_capacity_and_ssh_routes_want_a_login_and_the_users_own_job(env: Env) -> None:
    anonymous, signed_in = env.jupyter.http(None), env.jupyter.http()
    for path in ("pai/api/capacity", f"pai/api/jobs/{env.live}/ssh"):
        assert anonymous.get(path).status_code == 403, path
    capacity = signed_in.get("pai/api/capacity")
    assert capacity.status_code == 200 and [v["name"] for v in capacity.json()["virtualClusters"]] == ["default"]
    assert signed_in.get("pai/api/jobs/mallory~x/ssh").status_code == 404  # another user's job: as absent
    plain = signed_in.get(f"pai/api/jobs/{env.live}/ssh").json()  # no ssh plugin: says so, no commands
    assert plain["tasks"] == [] and "ssh plugin" in plain["message"]
