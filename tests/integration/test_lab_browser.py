"""The JupyterLab face in a real browser: a real ``jupyter lab`` server with the prebuilt
labextension (no ``jupyter lab build``) and the real daemon. The sidebar lists a submitted job and its state
turns SUCCEEDED; its job page shows the task table, the config and the log (markup the task printed stays
text); the terminal tab runs ``echo $((6*7))`` and shows 42; the TensorBoard tab shows the run's scalars; a job
submitted from the Lab form appears in the sidebar, and a bad field's error shows beside that field."""

# ruff: noqa: F811 (the fixtures imported above are parameters by the same names)
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.jupyter_fixture import services_job
from tests.helpers.lab import Env, env, lab_page  # noqa: F401  (fixtures: the tests ask for them by name)

pytestmark = pytest.mark.slow
MARKUP = "<img src=x one''rror=alert(1)>"  # sh joins the quoted halves: only the log says "onerror"


def row(page: Any, name: str) -> Any:
    return page.locator("#pai-jobs-panel .pai-JobRow").filter(has=page.locator(".pai-JobRow-name", has_text=name))


def test_the_sidebar_lists_a_job_until_it_succeeds(env: Env, lab_page: Any) -> None:
    job = env.api.submit_ok(services_job("lab-hello", command=f"echo '{MARKUP}'; sleep 2"))
    r = row(lab_page, "lab-hello")
    r.wait_for(timeout=60_000)
    r.locator(".pai-Badge", has_text="SUCCEEDED").wait_for(timeout=90_000)
    assert r.get_attribute("aria-label") == "lab-hello, SUCCEEDED"
    assert "root" in r.locator(".pai-JobRow-user").inner_text()
    lab_page.locator(".pai-StatusItem", has_text="running").wait_for(timeout=10_000)
    lab_page.locator(".pai-StateFilter").select_option("RUNNING")  # the filter hides it...
    r.wait_for(state="detached", timeout=10_000)
    lab_page.locator(".pai-StateFilter").select_option("")
    lab_page.locator(".pai-Search").fill("hello")  # ...the search keeps only it
    r.wait_for(timeout=10_000)
    assert row(lab_page, "lab-live").count() == 0
    # its job page: the task table, the config as submitted, the log (markup as text)
    r.click()
    page = lab_page.locator(".pai-JobPage").filter(has_text=job)
    page.locator(".pai-Tasks td", has_text="main").first.wait_for(timeout=30_000)
    page.locator(".pai-Tasks td", has_text="SUCCEEDED").first.wait_for(timeout=30_000)
    page.locator(".pai-ConfigText", has_text="sleep 2").wait_for(timeout=30_000)
    page.locator(".pai-LogText", has_text="onerror=alert(1)").wait_for(timeout=30_000)
    assert lab_page.locator("img[src='x']").count() == 0
    # its events, each with its time (to the second: a job's events are seconds apart)
    event = page.locator(".pai-Events-list li").first
    event.locator("time").wait_for(timeout=30_000)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", event.locator("time").inner_text())
    assert event.locator("time").get_attribute("datetime")
    page.get_by_label("Config format").select_option("json")
    page.locator(".pai-ConfigText", has_text='"jobName"').wait_for(timeout=30_000)
    page.get_by_role("button", name="Open this job in the submit form").click()  # Clone to form
    form = lab_page.locator(".pai-Form").last
    form.wait_for(timeout=30_000)
    assert form.get_by_label("Job name", exact=True).input_value() == "lab-hello-copy"
    assert "sleep 2" in form.get_by_label("Command", exact=True).input_value()


def test_the_terminal_tab_runs_a_command(env: Env, lab_page: Any) -> None:
    env.api.wait(env.live, ("RUNNING",), timeout=60)
    row(lab_page, "lab-live").click()
    page = lab_page.locator(".pai-JobPage").filter(has_text=env.live)
    page.get_by_role("button", name="Terminal of main[0] of lab-live").click()
    frame = lab_page.frame_locator(".pai-ServiceFrame iframe")
    frame.get_by_role("status").filter(has_text="Connected").wait_for(timeout=60_000)
    header = frame.locator("header").inner_text()
    assert header.count("main[0] of root~lab-live") == 1, header  # the title once, not again in the status
    frame.locator(".xterm").click()
    lab_page.keyboard.type("echo $((6*7))")
    lab_page.keyboard.press("Enter")
    frame.locator(".xterm-rows > div", has_text="42").filter(has_not_text="echo").first.wait_for(timeout=30_000)


def test_the_tensorboard_tab_shows_the_runs_scalars(env: Env, lab_page: Any) -> None:
    env.api.wait(env.live, ("RUNNING",), timeout=60)
    row(lab_page, "lab-live").click()
    page = lab_page.locator(".pai-JobPage").filter(has_text=env.live)
    page.get_by_role("button", name="TensorBoard of main[0] of lab-live").click()
    frame = lab_page.frame_locator(".pai-ServiceFrame iframe").last
    frame.get_by_text("loss").first.wait_for(timeout=120_000)
    frame.locator("scalar-card line-chart").first.wait_for(timeout=60_000)  # the drawn chart of the loss tag


def test_the_job_page_offers_only_the_services_the_task_has(env: Env, lab_page: Any) -> None:
    """lab-live runs TensorBoard and no Jupyter: its task row has Terminal and TensorBoard buttons, no Jupyter one
    (which opened a tab of raw ``{"code": "NotFound"}``); the buttons come from the server's answer."""
    env.api.wait(env.live, ("RUNNING",), timeout=60)
    row(lab_page, "lab-live").click()
    page = lab_page.locator(".pai-JobPage").filter(has_text=env.live)
    page.get_by_role("button", name="TensorBoard of main[0] of lab-live").wait_for(timeout=30_000)
    buttons = page.get_by_role("button", name=re.compile(r" of main\[0\] of lab-live$"))
    assert [b.get_attribute("aria-label") for b in buttons.all()] == [
        "Terminal of main[0] of lab-live",
        "TensorBoard of main[0] of lab-live",
    ]


def test_a_job_from_the_lab_form_appears_in_the_sidebar(env: Env, lab_page: Any) -> None:
    lab_page.locator("#pai-jobs-panel").get_by_role("button", name="New PAI job").click()
    form = lab_page.locator(".pai-Form").last
    form.get_by_label("Job name", exact=True).fill("lab-form-job")
    form.get_by_label("Image", exact=True).fill("pai-test/busybox:latest")
    assert not form.get_by_label("Pro mode").is_checked()  # memory is a basic setting: a job's first question
    memory, max_run = form.get_by_label("Memory (MB)", exact=True), form.get_by_label("Max run time (minutes, 0: none)")
    memory.fill("0")
    max_run.fill("-1")
    form.get_by_label("Command", exact=True).fill("echo from-the-form")
    form.get_by_role("button", name="Submit").click()
    field = form.locator(".pai-Field")
    memory_error = field.filter(has=lab_page.get_by_label("Memory (MB)", exact=True)).locator(".pai-Field-error")
    memory_error.filter(has_text="minimum").wait_for(timeout=30_000)  # beside its field, from the server's rules
    assert memory.get_attribute("aria-invalid") == "true"
    runtime_error = field.filter(has=lab_page.get_by_label("Max run time")).locator(".pai-Field-error")
    runtime_error.filter(has_text="above 0").wait_for(timeout=10_000)
    memory.fill("256")
    max_run.fill("5")
    form.get_by_role("button", name="Submit").click()
    form.locator(".pai-Form-result", has_text="Submitted root~lab-form-job").wait_for(timeout=30_000)
    # the way on to the job: the toast's Open, and the link beside "Submitted"
    job_page = lab_page.locator(".pai-JobPage").filter(has_text="root~lab-form-job")
    toast = lab_page.locator(".Toastify__toast", has_text="Submitted root~lab-form-job")
    toast.get_by_role("button", name="Open").click()
    job_page.locator(".pai-Tasks td", has_text="main").first.wait_for(timeout=30_000)
    lab_page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="New PAI job").click()
    job_page.wait_for(state="hidden", timeout=10_000)
    form.get_by_role("button", name="Open the job page of root~lab-form-job").click()
    job_page.wait_for(state="visible", timeout=10_000)
    row(lab_page, "lab-form-job").wait_for(timeout=30_000)
    assert env.api.wait("root~lab-form-job", timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
    sent = json.loads(env.api.http.get("/api/v2/jobs/root~lab-form-job/config").text)
    assert sent["extras"]["maxRunTimeMinutes"] == 5 and sent["taskRoles"][0]["memoryMB"] == 256


def test_submit_as_pai_job_from_the_file_browser_and_the_editor(env: Env, lab_page: Any) -> None:
    (env.root / "menu-job.yaml").write_text(
        "protocolVersion: 2\nname: from-the-menu\ntype: job\nprerequisites:\n"
        "  - {name: image, type: dockerimage, uri: python:3.11}\ntaskRoles:\n  main:\n    instances: 1\n"
        "    dockerImage: image\n    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}\n"
        "    commands: [echo from the menu]\n"
    )
    (env.root / "editor-job.json").write_text(
        json.dumps(
            json.loads(
                '{"jobName": "from-the-editor", "image": "python:3.11", '
                '"taskRoles": [{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, '
                '"command": "echo from the editor"}]}'
            ),
            indent=2,
        )
    )
    lab_page.locator(".jp-SideBar [data-id='filebrowser']").click()
    item = lab_page.locator(".jp-DirListing-item", has_text="menu-job.yaml")
    item.click(button="right")
    lab_page.locator(".lm-Menu-itemLabel", has_text="Submit as PAI job").click()
    row(lab_page, "from-the-menu").wait_for(state="attached", timeout=30_000)  # the sidebar behind the file browser
    written = (env.root / "editor-job.json").stat().st_mtime_ns
    lab_page.locator(".jp-DirListing-item", has_text="editor-job.json").dblclick()
    lab_page.locator(".jp-Document:visible .pai-SubmitFileButton").click()  # unchanged: submitted as it is
    row(lab_page, "from-the-editor").wait_for(state="attached", timeout=30_000)
    assert (env.root / "editor-job.json").stat().st_mtime_ns == written  # (not saved again)
    # a changed file is saved, then submitted as saved
    lab_page.locator(".jp-DirListing-item", has_text="menu-job.yaml").dblclick()
    code = lab_page.locator(".jp-Document:visible .cm-content")
    code.wait_for(timeout=30_000)
    code.click()
    lab_page.keyboard.press("Control+a")
    edited = (env.root / "menu-job.yaml").read_text().replace("from-the-menu", "edited-in-lab")
    lab_page.keyboard.insert_text(edited)
    lab_page.locator(".jp-Document:visible .pai-SubmitFileButton").click()
    row(lab_page, "edited-in-lab").wait_for(state="attached", timeout=30_000)
    assert (env.root / "menu-job.yaml").read_text() == edited
    for job in ("root~from-the-menu", "root~from-the-editor", "root~edited-in-lab"):
        assert env.api.wait(job, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"


LUMINANCE = """(sel) => {
  const el = document.querySelector(sel);
  const lum = (c) => {
    const [r, g, b] = c.match(/[\\d.]+/g).map(Number);
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  let bg = el;  // the nearest ancestor with a painted background
  while (bg && getComputedStyle(bg).backgroundColor.match(/rgba\\(.*, 0\\)|transparent/)) { bg = bg.parentElement; }
  return [lum(getComputedStyle(el).color), lum(getComputedStyle(bg).backgroundColor)];
}"""


def test_the_dark_theme_applies_to_the_sidebar_and_the_job_page(env: Env, lab_page: Any) -> None:
    row(lab_page, "lab-live").wait_for(timeout=60_000)
    fg, bg = lab_page.evaluate(LUMINANCE, "#pai-jobs-panel .pai-JobRow-name")
    assert fg < 0.3 < 0.7 < bg, (fg, bg)  # light theme: dark text on a light panel
    lab_page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Dark$")).click()
    try:
        lab_page.locator("body[data-jp-theme-light='false']").wait_for(state="attached", timeout=30_000)
        row(lab_page, "lab-live").click()
        lab_page.locator(".pai-JobPage .pai-Tasks td").first.wait_for(timeout=30_000)
        for selector in (
            "#pai-jobs-panel .pai-JobRow-name",
            ".pai-JobPage .pai-Tasks td",
            ".pai-JobPage .pai-Section-title",
        ):
            fg, bg = lab_page.evaluate(LUMINANCE, selector)
            assert bg < 0.3 < 0.6 < fg, (selector, fg, bg)  # light text on a dark background
    finally:
        lab_page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
        lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Light$")).click()
        lab_page.locator("body[data-jp-theme-light='true']").wait_for(state="attached", timeout=30_000)


def test_keyboard_actions_and_the_end_of_job_notification(env: Env, lab_page: Any, tmp_path: Path) -> None:
    # the job ends when the test says so: a notice shows for 10 s, and a slow job page must not outlast it
    go = tmp_path / "go"
    job = env.api.submit_ok(services_job("lab-notify", command=f"while [ ! -e {go} ]; do sleep 0.2; done"))
    r = row(lab_page, "lab-notify")
    r.locator(".pai-Badge", has_text="RUNNING").wait_for(timeout=60_000)  # seen live by this session
    r.focus()
    lab_page.keyboard.press("Shift+F10")  # the row's actions, from the keyboard
    menu = lab_page.locator(".pai-RowMenu")
    menu.wait_for(timeout=10_000)
    assert menu.locator(".lm-Menu-itemLabel", has_text="Stop").count() == 1
    lab_page.keyboard.press("Escape")
    r.focus()
    lab_page.keyboard.press("Enter")  # opens its job page
    lab_page.locator(".pai-JobPage").filter(has_text=job).locator(".pai-Tasks td", has_text="main").first.wait_for(
        timeout=30_000
    )
    go.touch()
    lab_page.get_by_text("PAI job lab-notify SUCCEEDED").first.wait_for(timeout=60_000)
    assert env.api.detail(job)["jobStatus"]["state"] == "SUCCEEDED"


def test_the_job_page_sets_the_work_duration_and_offers_the_ssh_key(env: Env, lab_page: Any) -> None:
    from tests.helpers.ssh import need_sshd

    need_sshd()
    doc = json.loads(services_job("lab-tools"))
    doc["extras"] = {"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh", "parameters": {"jobssh": True}}]}
    job = env.api.submit_ok(json.dumps(doc))
    r = row(lab_page, "lab-tools")
    r.locator(".pai-Badge", has_text="RUNNING").wait_for(timeout=60_000)
    r.click()
    page = lab_page.locator(".pai-JobPage").filter(has_text=job)
    key = page.locator("a.pai-SshKey")
    key.wait_for(timeout=30_000)
    href = key.get_attribute("href")
    assert href and href.endswith(f"/pai/api/jobs/{job}/ssh-key") and key.get_attribute("download") is not None
    ssh = page.get_by_role("button", name=f"How to log in to {job} with ssh")
    gap = ssh.bounding_box()["x"] - (key.bounding_box()["x"] + key.bounding_box()["width"])
    assert gap >= 4, gap  # "SSH key" and "SSH…" apart, as the other tools are
    got = lab_page.request.get(href)  # the signed-in page's cookie
    assert got.status == 200 and got.text().startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    page.get_by_label("Work duration in minutes (max run time)").fill("-1")
    page.get_by_role("button", name="Set the max run time of this job").click()
    page.locator(".pai-JobTools-status", has_text="above 0").wait_for(timeout=10_000)
    assert env.api.detail(job)["jobStatus"]["state"] == "RUNNING"  # nothing sent
    page.get_by_label("Work duration in minutes (max run time)").fill("0.02")
    page.get_by_role("button", name="Set the max run time of this job").click()
    page.locator(".pai-JobTools-status", has_text="Work duration set to 0.02 minutes").wait_for(timeout=10_000)
    page.locator(".pai-Summary dd", has_text="max run time of 0.02 minutes").wait_for(timeout=60_000)
    page.locator(".pai-Summary .pai-Badge", has_text="STOPPED").wait_for(timeout=30_000)
    assert page.get_by_role("button", name="Set the max run time of this job").is_disabled()
