"""The Lab's Sweeps page (docs/sweeps.md) against a real daemon (2 CPUs, process runtime), a real ``jupyter lab`` and
real trials driven by ``pai_jupyter.Sweep`` from this process: the Jupyter server's routes (``server/lab_sweeps.py``:
the user's own sweeps only, a live trial read from the cluster while no driver writes, no anonymous call, a refresh
in three daemon requests however many sweeps and live trials) and, in Chromium, a grid sweep's trials appearing
with their reported loss while they run (one request per refresh), sorted by the loss column, linking to their job
pages, with a parameter value full of markup shown as text."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pai_jupyter.client import AsyncClient, Client
from pai_jupyter.client.profiles import Profile
from pai_jupyter.common.states import FINAL
from pai_jupyter.server.lab_sweeps import sweeps_page
from pai_jupyter.sweep import Sweep, trial_job
from tests.helpers.browser import open_lab_page, run_from_palette
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import JupyterServer
from tests.helpers.servers import servers
from tests.helpers.sweeps import template
from tests.helpers.transport import Counting
from tests.polling import wait_for

pytestmark = pytest.mark.slow  # (a daemon and a JupyterLab server per module)
MARKUP = "<img src=x onerror=window.__pwned=1>"


@dataclass
class Env:
    api: Api
    jupyter: JupyterServer
    client: Client  # the driver's: the same user as the Jupyter server's profile


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("lab-sweeps")
    with servers(tmp) as s:
        api = s.daemon(cpus=2)
        jupyter = s.jupyter(lab=True)
        settings = tmp / "jupyter" / "config" / "lab" / "user-settings" / "pai-jupyter"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"refreshSeconds": 1}))
        user = api.http.get("/api/v2/info").json()["user"]
        with Client(Profile(name="lab-sweeps", url=api.url, username=user, token=api.token)) as client:
            yield Env(api, jupyter, client)


@pytest.fixture
def lab_page(env: Env, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from open_lab_page(browser, env.jupyter, request)


def test_the_sweep_routes_answer_the_users_own_sweeps(env: Env) -> None:
    Sweep("routes", template(), {"x": [0.0, 0.3, 0.6], "lr": [0.01]}, client=env.client, poll=0.05).run(timeout=120)
    http = env.jupyter.http()
    listed = http.get("pai/api/sweeps")
    assert listed.status_code == 200, listed.text
    row = next(r for r in listed.json()["sweeps"] if r["name"] == "routes")
    assert (row["status"], row["done"], row["submitted"], row["total"]) == ("done", 3, 3, 3)
    assert (row["objective"], row["mode"], row["best"]["number"]) == ("loss", "min", 1)
    assert row["best"]["value"] == pytest.approx(0.0) and row["best"]["job"].endswith("~routes-0001")
    one = http.get("pai/api/sweeps/routes").json()
    assert one["params"] == ["lr", "x"] and one["done"] == 3
    assert [(t["number"], t["name"], t["state"]) for t in one["trials"]] == [
        (n, f"routes-000{n}", "SUCCEEDED") for n in range(3)
    ]
    assert [t["params"]["x"] for t in one["trials"]] == [0.0, 0.3, 0.6]
    assert one["trials"][0]["metrics"]["loss"] == pytest.approx(0.09) == one["trials"][0]["value"]

    bob = env.api.new_user("bob")  # another user's sweep: not listed, and 404 by its name
    assert bob.http.put("/api/v2/local/sweeps/bob~hidden", json={"state": {}, "revision": 0}).status_code == 200
    assert "hidden" not in [r["name"] for r in http.get("pai/api/sweeps").json()["sweeps"]]
    assert http.get("pai/api/sweeps/hidden").status_code == 404
    assert http.get("pai/api/sweeps/no%20such").status_code == 404  # not a sweep's name
    anon = env.jupyter.http(None)
    assert anon.get("pai/api/sweeps").status_code == 403
    assert anon.get("pai/api/sweeps/routes").status_code == 403


def test_a_live_trial_is_read_from_the_cluster_while_no_driver_writes(env: Env) -> None:
    """The stored state says SUBMITTED with no metrics (as a driver that stopped left it); the route shows the
    trial's job running and the loss it has reported so far."""
    job = env.client.submit(trial_job(template(steps=200, sleep=0.2), "manual-0000", {"x": 0.5, "lr": 0.01}))
    trial = {"number": 0, "job": job, "params": {"x": 0.5}, "state": "SUBMITTED", "value": None, "metrics": {}}
    state = {"status": "running", "objective": "loss", "mode": "min", "max_trials": 1, "space": {}, "trials": [trial]}
    env.client.put_sweep_state("manual", state, 0)
    http = env.jupyter.http()

    def live() -> dict[str, Any] | None:
        t = http.get("pai/api/sweeps/manual").json()["trials"][0]
        return t if t["state"] == "RUNNING" and "loss" in t["metrics"] else None

    seen = wait_for(live, 60, "the trial running with its loss")
    assert seen["value"] == seen["metrics"]["loss"] > 0
    assert (env.client.sweep_state("manual").state or {})["trials"][0]["state"] == "SUBMITTED"  # nothing written
    env.client.stop(job)
    env.api.wait(job, FINAL, timeout=60)


def test_a_refresh_is_three_daemon_requests_however_many_sweeps_and_live_trials(env: Env) -> None:
    """The page's one request (``pai/api/sweeps``) reads the sweeps with their states, the live jobs and the live
    trials' reports in one daemon request each: not a state per sweep, nor a detail and reports per live trial.
    Three trials are live (two running, one waiting for a CPU), one ended, in the second of two sweeps."""
    profile = Profile(name="count", url=env.api.url, username=env.client.username, token=env.api.token)
    live = [
        env.client.submit(trial_job(template(steps=300, sleep=0.2), f"counted-000{n}", {"x": 0.1 * n, "lr": 0.01}))
        for n in range(3)
    ]
    trials = [
        {"number": n, "job": job, "params": {"x": 0.1 * n}, "state": "SUBMITTED", "value": None, "metrics": {}}
        for n, job in enumerate(live)
    ]
    ended = {"number": 3, "job": f"{env.client.username}~gone", "params": {"x": 1}, "state": "FAILED", "value": None}
    state = {"status": "running", "objective": "loss", "mode": "min", "max_trials": 4, "space": {}}
    env.client.put_sweep_state("counted-other", {**state, "trials": []}, 0)
    env.client.put_sweep_state("counted", {**state, "trials": [*trials, ended]}, 0)

    async def refresh() -> tuple[list[str], dict[str, Any]]:
        seen = Counting()
        async with AsyncClient(profile, transport=seen) as pai:
            await pai.locality()  # asked once per client (an embedded cluster?), before the count
            seen.paths.clear()
            page = await sweeps_page(pai, "counted", logging.getLogger("test"))
        return seen.paths, dict(page)

    def running() -> tuple[list[str], dict[str, Any]] | None:
        paths, page = asyncio.run(refresh())
        shown = [(t["state"], "loss" in t["metrics"]) for t in page["sweep"]["trials"]]
        return (paths, page) if shown[:2] == [("RUNNING", True)] * 2 and shown[2][0] == "WAITING" else None

    paths, page = wait_for(running, 90, "two trials running with their loss, one waiting")
    assert sorted(paths) == ["/api/v2/local/jobs", "/api/v2/local/reports", "/api/v2/local/sweeps"]
    assert [r["name"] for r in page["sweeps"]][:2] == ["counted", "counted-other"]  # newest first
    assert page["sweep"]["trials"][3]["state"] == "FAILED"  # ended: as the driver wrote it
    missing = f"{env.client.username}~no-such-job"  # (the reports of a job the cluster does not show: left out)
    assert list(env.client.reports_of([live[0], missing])) == [live[0]]
    many = [f"{env.client.username}~no-such-job-{i}" for i in range(1500)]  # more than the daemon takes at once
    assert list(env.client.reports_of([*many, live[1]])) == [live[1]]
    for job in live:
        env.client.stop(job)
    for job in live:
        env.api.wait(job, FINAL, timeout=60)


@pytest.mark.browser
def test_the_sweeps_page_shows_a_running_grid_sweeps_trials_and_sorts_them(env: Env, lab_page: Any) -> None:
    space = {"x": [0.0, 0.3, 0.6, 0.9], "lr": [0.01], "note": [MARKUP]}
    # (2 s a step: the page catches a trial running with its loss on a loaded machine too)
    sweep = Sweep("labgrid", template(steps=4, sleep=2.0), space, concurrency=2, client=env.client, poll=0.05)
    asked: list[str] = []  # the page's requests: one per refresh, the list and the picked sweep together
    lab_page.on("request", lambda r: asked.append(urlsplit(r.url).path) if "/pai/api/sweeps" in r.url else None)
    sweep.start()
    run_from_palette(lab_page, "PAI sweeps", ".pai-SweepsView")
    view = lab_page.locator(".pai-SweepsView")
    view.locator(".pai-SweepRow[data-sweep='labgrid'] .pai-SweepName").click()
    rows = view.locator(".pai-TrialTable .pai-TrialRow")
    loss = "td[data-column='metric:loss']"

    def running_with_loss() -> bool | None:  # live: a trial still running already shows its reported loss
        for r in rows.all():
            state = r.locator("td[data-column='state']").inner_text()
            if state == "RUNNING" and r.locator(loss).count() and r.locator(loss).inner_text() != "–":
                return True
        return None

    wait_for(running_with_loss, 90, lambda: f"a running trial with its loss: {rows.all_inner_texts()}")
    sweep.wait(120)
    assert sweep.error is None and sweep.status == "done"
    status = view.locator(".pai-SweepRow[data-sweep='labgrid'] .pai-SweepStatus")
    wait_for(lambda: status.inner_text() == "done" or None, 30, "the sweep done on the page")
    done = view.locator(".pai-SweepRow[data-sweep='labgrid'] .pai-SweepDone")
    assert done.inner_text() == "4 / 4"
    assert asked and set(asked) == {"/pai/api/sweeps"}, set(asked)  # never a request per sweep

    def shown() -> list[tuple[int, str, str]] | None:
        found = [
            (
                int(r.get_attribute("data-trial") or -1),
                r.locator("td[data-column='state']").inner_text(),
                r.locator(loss).inner_text(),
            )
            for r in rows.all()
        ]
        return found if len(found) == 4 and all(s == "SUCCEEDED" and v != "–" for _, s, v in found) else None

    wait_for(shown, 30, lambda: f"four succeeded trials with their loss: {rows.all_inner_texts()}")
    # the sidebar: one row for the sweep, its trials under it once opened
    sidebar = lab_page.locator("#pai-jobs-panel")
    group = sidebar.locator(".pai-SweepGroup[data-sweep='labgrid']")
    group.filter(has_text="4 trials · 4 succeeded").wait_for(timeout=30_000)
    trials = sidebar.locator(".pai-JobRow.pai-mod-nested")
    assert trials.count() == 0 and group.get_attribute("aria-expanded") == "false"
    group.click()
    wait_for(lambda: trials.count() == 4 or None, 10, "the sweep's four trials under it")
    assert sorted(t.locator(".pai-JobRow-name").text_content() for t in trials.all()) == [
        f"labgrid-000{n}" for n in range(4)
    ]
    by_loss = [t["number"] for t in sorted(sweep.trials, key=lambda t: (t["metrics"]["loss"], t["number"]))]
    by_loss_down = [t["number"] for t in sorted(sweep.trials, key=lambda t: (-t["metrics"]["loss"], t["number"]))]
    assert by_loss[0] == 1 and by_loss_down[0] == 3  # x = 0.3 is the bowl's bottom, 0.9 the farthest
    header = view.locator(".pai-TrialTable th[data-column='metric:loss']")
    order = lambda: [int(r.get_attribute("data-trial") or -1) for r in rows.all()]  # noqa: E731
    box = header.bounding_box()  # the whole header cell sorts, not only its word
    lab_page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] - 2)
    assert order() == by_loss and header.get_attribute("aria-sort") == "ascending"
    header.get_by_role("button", name="Sort by loss").click()
    assert order() == by_loss_down and header.get_attribute("aria-sort") == "descending"
    assert view.locator(".pai-TrialRow.pai-mod-best").get_attribute("data-trial") == "1"
    assert view.locator(".pai-SweepRow[data-sweep='labgrid'] .pai-SweepBest").inner_text().startswith("loss 0")

    note = view.locator(".pai-TrialRow td[data-column='param:note']").first  # user text, shown as text
    assert note.inner_text() == MARKUP and view.locator("img").count() == 0
    assert lab_page.evaluate("window.__pwned") is None

    shots = os.environ.get("PAI_LOOK_SHOTS")  # as test_lab_look.py: the page in both themes, to look at
    if shots:
        save_shots(lab_page, view, Path(shots))
    view.locator(".pai-TrialRow[data-trial='1'] .pai-TrialJob").click()  # the trial's job page
    page_id = "pai-job-" + sweep.trials[1]["job"].replace("~", "_")
    lab_page.locator(f".pai-JobPage#{page_id}").wait_for(state="visible", timeout=30_000)


def save_shots(lab_page: Any, view: Any, to: Path) -> None:
    """The Sweeps page in the light and the dark theme."""
    to.mkdir(parents=True, exist_ok=True)
    news = lab_page.get_by_role("button", name="No", exact=True)
    if news.count():
        news.click()  # Lab's "official Jupyter news?" toast
    for theme, light in (("dark", "false"), ("light", "true")):
        lab_page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
        lab_page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^JupyterLab {theme.title()}$")).click()
        lab_page.locator(f"body[data-jp-theme-light='{light}']").wait_for(state="attached", timeout=30_000)
        lab_page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=30_000)
        view.screenshot(path=str(to / f"sweeps-{theme}.png"))
