"""The Lab's queue view and job notifications in a real browser, with the real daemon (2 CPUs) and a
real ``jupyter lab``: a job with ``extras.jobStatusChangeNotification`` shows OpenPAI's words as a Lab
notification when it starts and when it succeeds; the queue view lists the waiting jobs in order with why they
wait, and an admin moves one up and gives one a priority class (the daemon's queue agrees). Without a browser the
daemon's queue route is still checked (a user sees only their own waiting jobs and may not reorder), and the
Jupyter server's routes (what they refuse before asking the daemon, own jobs only, no anonymous call)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pai_jupyter.client.profiles import Profile, upsert_profile
from pai_jupyter.common.states import FINAL
from tests.helpers.browser import open_lab_page, run_from_palette
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import JupyterServer, services_job
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = pytest.mark.slow  # (a daemon and a JupyterLab server per module)


@dataclass
class Env:
    api: Api
    jupyter: JupyterServer


CRIT = {"hivedScheduler": {"jobPriorityClass": "crit"}}


def job(name: str, command: str = "sleep 600", cpu: int = 1, extras: dict[str, Any] | None = None) -> str:
    doc = json.loads(services_job(name, command))
    doc["taskRoles"][0]["cpuNumber"] = cpu
    doc["taskRoles"][0]["memoryMB"] = 256
    if extras:
        doc["extras"] = extras
    return json.dumps(doc)


def order(api: Api) -> list[str]:
    r = api.http.get("/api/v2/local/queue")
    assert r.status_code == 200, r.text
    return [j["name"] for j in r.json()["virtualClusters"].get("default", [])]


def stop_all(api: Api) -> None:
    """Stop every job still live (each test starts with both CPUs free)."""
    for j in api.http.get("/api/v2/jobs").json():
        if j["state"] not in FINAL:
            api.http.put(f"/api/v2/jobs/{j['username']}~{j['name']}/executionType", json={"value": "STOP"})
            api.wait(f"{j['username']}~{j['name']}", timeout=60)


def queue_view(lab_page: Any) -> tuple[Any, Any]:
    """Open the queue view from the command palette; the view and its rows' job cells."""
    run_from_palette(lab_page, "Show PAI waiting queue", ".pai-QueueView")
    view = lab_page.locator(".pai-QueueView")
    return view, view.locator(".pai-QueueRow .pai-QueueJob")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("lab-queue")
    with servers(tmp) as s:
        api = s.daemon(cpus=2)
        jupyter = s.jupyter(lab=True, lab_settings={"refreshSeconds": 1})
        yield Env(api, jupyter)


@pytest.fixture
def lab_page(env: Env, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A Lab page with the PAI sidebar open in a fresh layout; a screenshot on failure."""
    yield from open_lab_page(browser, env.jupyter, request)


@pytest.mark.browser
def test_a_job_that_asked_for_notification_is_told_in_the_lab(env: Env, lab_page: Any) -> None:
    told = {"running": True, "succeeded": True}
    env.api.submit_ok(job("lab-told", "sleep 3", extras={"jobStatusChangeNotification": told}))
    lab_page.get_by_text("The job lab-told has started running.").first.wait_for(timeout=60_000)
    lab_page.get_by_text("The job lab-told has succeeded.").first.wait_for(timeout=60_000)
    # told in OpenPAI's words instead of the plain end-of-job notice
    assert lab_page.get_by_text("PAI job lab-told SUCCEEDED").count() == 0


@pytest.mark.browser
def test_the_queue_view_lists_why_jobs_wait_and_an_admin_reorders_them(env: Env, lab_page: Any) -> None:
    blocker = env.api.submit_ok(job("lab-blocker", cpu=2, extras=CRIT))  # (a prod job preempts no crit job)
    env.api.wait(blocker, {"RUNNING"}, timeout=60)
    for name in ("lab-q1", "lab-q2", "lab-q3"):
        env.api.submit_ok(job(name))
    wait_for(lambda: order(env.api) == ["lab-q1", "lab-q2", "lab-q3"] or None, 30, "the three jobs to wait")
    view, rows = queue_view(lab_page)
    wait_for(lambda: rows.all_inner_texts() == ["root~lab-q1", "root~lab-q2", "root~lab-q3"] or None, 30, "rows")
    reason = view.locator(".pai-QueueRow[data-job='root~lab-q2'] .pai-QueueReason").inner_text()
    assert "1 job ahead" in reason and "behind root~lab-q1" in reason, reason
    view.get_by_role("button", name="Move root~lab-q3 up").click()
    wait_for(lambda: rows.all_inner_texts() == ["root~lab-q1", "root~lab-q3", "root~lab-q2"] or None, 30, "moved")
    assert order(env.api) == ["lab-q1", "lab-q3", "lab-q2"]
    view.locator(".pai-QueueRow[data-job='root~lab-q2'] .pai-QueuePriority").select_option("prod")
    wait_for(lambda: rows.all_inner_texts() == ["root~lab-q2", "root~lab-q1", "root~lab-q3"] or None, 30, "prod")
    assert order(env.api) == ["lab-q2", "lab-q1", "lab-q3"]
    stop_all(env.api)


@pytest.mark.browser
def test_a_user_who_may_not_reorder_sees_the_queue_without_controls(env: Env, lab_page: Any) -> None:
    stop_all(env.api)
    blocker = env.api.submit_ok(job("ro-blocker", cpu=2))
    env.api.wait(blocker, {"RUNNING"}, timeout=60)
    carol = env.api.new_user("carol")
    waiting = carol.submit_ok(job("ro-waits"))
    upsert_profile(Profile(name="carol", url=env.api.url, username="carol", token=carol.token), env.api.home)
    http = env.jupyter.http()
    assert http.put("pai/api/profiles/current", json={"name": "carol"}).status_code == 200
    try:
        view, rows = queue_view(lab_page)
        wait_for(lambda: rows.all_inner_texts() == [waiting] or None, 30, "carol's waiting job")
        assert "only an admin may reorder" in view.locator(".pai-QueueView-status").inner_text()
        assert view.locator(f".pai-QueueRow[data-job='{waiting}'] .pai-QueueClass").inner_text() == "default"
        # no controls that would only be refused: no class select, no up / down, no empty column for them
        assert view.locator(".pai-QueueTable").locator(".pai-QueuePriority, .pai-QueueMoves, button").count() == 0
        assert view.locator(".pai-QueueTable th").all_inner_texts() == ["Place", "Job", "Priority", "Why waiting"]
    finally:
        assert http.put("pai/api/profiles/current", json={"name": "local"}).status_code == 200
        stop_all(env.api)


def test_a_user_sees_only_their_own_waiting_jobs_and_may_not_reorder(env: Env) -> None:
    stop_all(env.api)
    blocker = env.api.submit_ok(job("q-blocker", cpu=2))
    env.api.wait(blocker, {"RUNNING"}, timeout=60)
    bob = env.api.new_user("bob")
    mine = [env.api.submit_ok(job("q-root"))]
    theirs = [bob.submit_ok(job(f"q-bob{i}")) for i in range(2)]
    r = bob.http.get("/api/v2/local/queue")
    assert r.status_code == 200, r.text
    line = r.json()["virtualClusters"]["default"]
    assert [j["job"] for j in line] == theirs and not r.json()["canReorder"]
    # fair share (docs/queue.md): bob has used nothing, root's jobs ran all along: bob's first job goes ahead of
    # root's, his second behind it; bob's places count root's job, which his view does not show
    assert [j["ahead"] for j in line] == [0, 2] and f"behind {theirs[0]}" in line[1]["waitingReason"]
    assert "fair share" not in line[1]["waitingReason"]  # (behind his own job: fair share is not why)
    assert bob.http.put(f"/api/v2/local/jobs/{theirs[1]}/priority", json={"position": 0}).status_code == 403
    admin = env.api.http.get("/api/v2/local/queue").json()
    shown = admin["virtualClusters"]["default"]
    assert admin["canReorder"] and [j["job"] for j in shown] == [theirs[0], *mine, theirs[1]]
    assert shown[1]["fairShareUsage"] > shown[0]["fairShareUsage"] == 0
    assert "fair share: root's recent use is" in shown[1]["waitingReason"], shown[1]
    stop_all(env.api)


def test_the_servers_queue_routes_check_what_they_forward(env: Env) -> None:
    """Through the Jupyter server: the queue and a job's notification wishes; a bad class or place is 400 before
    the daemon is asked, someone else's notification wishes are 404, and anonymous calls 403."""
    stop_all(env.api)
    http = env.jupyter.http()
    told = env.api.submit_ok(job("srv-told", "true", extras={"jobStatusChangeNotification": {"failed": True}}))
    assert http.get(f"pai/api/jobs/{told}/notification").json()["states"] == ["FAILED"]
    plain = env.api.submit_ok(job("srv-plain", "true"))
    assert http.get(f"pai/api/jobs/{plain}/notification").json()["states"] == []
    carol = env.api.new_user("carol")
    hers = carol.submit_ok(job("srv-carol", "true", extras={"jobStatusChangeNotification": {"failed": True}}))
    assert http.get(f"pai/api/jobs/{hers}/notification").status_code == 404
    assert http.put(f"pai/api/jobs/{plain}/priority", json={"jobPriority": "<b>"}).status_code == 400
    assert http.put(f"pai/api/jobs/{plain}/priority", json={"position": -1}).status_code == 400
    assert http.put(f"pai/api/jobs/{plain}/priority", json={"position": True}).status_code == 400
    queue = http.get("pai/api/queue")
    assert queue.status_code == 200 and queue.json()["canReorder"] is True
    anon = env.jupyter.http(None)
    assert anon.get("pai/api/queue").status_code == 403
    assert anon.put(f"pai/api/jobs/{plain}/priority", json={"position": 0}).status_code == 403
    stop_all(env.api)


@pytest.mark.browser
def test_the_owner_of_an_interactive_job_is_told_in_the_lab_before_it_is_preempted(env: Env, lab_page: Any) -> None:
    """An interactive oppo job (its command takes its whole grace) holds both CPUs; a crit job preempts it: the Lab
    says so at once, with who preempted it, the signal and the grace, while the job still has its grace to save."""
    stop_all(env.api)
    extras = {
        "hivedScheduler": {"jobPriorityClass": "oppo"},
        "com.pai_jupyter.interactive": True,
        "preemption": {"graceSeconds": 20},
    }
    session = env.api.submit_ok(job("lab-session", "trap '' TERM; sleep 600", cpu=2, extras=extras))
    env.api.wait(session, {"RUNNING"}, timeout=60)
    lab_page.get_by_text("lab-session").first.wait_for(timeout=60_000)  # (the sidebar's list has it: a baseline)
    urgent = env.api.submit_ok(job("lab-urgent", "true", extras={"hivedScheduler": {"jobPriorityClass": "crit"}}))
    told = lab_page.get_by_text("PAI job lab-session is being preempted").first
    told.wait_for(timeout=30_000)
    text = told.inner_text()
    assert f"preempted by {urgent}" in text and "SIGTERM, SIGKILL 20 s later" in text, text
    assert env.api.detail(session)["jobStatus"]["state"] == "RUNNING"  # told within its grace
    assert env.api.wait(urgent, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
    stop_all(env.api)
