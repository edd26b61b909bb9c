"""An interactive job is never preempted silently, in a real browser with the real daemon (2 CPUs) and a real
``jupyter lab`` whose current profile is Alice's: an admin preempts her interactive job by hand
(``POST .../preempt``); the Lab open as Alice says so at once with the admin's reason, the signal and the job's
grace, while the job still runs in its grace; the job then waits again and runs as its next attempt, which the Lab
does not take for a second preemption. Without a browser: the Jupyter server's list says which job is being
preempted (``preempting``) and not after it runs again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pai_jupyter.client.profiles import Profile, upsert_profile
from pai_jupyter.common.states import FINAL
from tests.helpers.browser import open_lab_page
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import JupyterServer, services_job
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = pytest.mark.slow  # (a daemon and a JupyterLab server per module)

INTERACTIVE = {
    "hivedScheduler": {"jobPriorityClass": "oppo"},
    "com.pai_jupyter.interactive": True,
    "preemption": {"graceSeconds": 20},
}


@dataclass
class Env:
    admin: Api
    alice: Api
    jupyter: JupyterServer


def job(name: str, command: str) -> str:
    doc = json.loads(services_job(name, command))
    doc["taskRoles"][0]["cpuNumber"] = 1
    doc["taskRoles"][0]["memoryMB"] = 256
    doc["extras"] = INTERACTIVE
    return json.dumps(doc)


def stop_all(api: Api) -> None:
    for j in api.http.get("/api/v2/jobs").json():
        if j["state"] not in FINAL:
            api.http.put(f"/api/v2/jobs/{j['username']}~{j['name']}/executionType", json={"value": "STOP"})
            api.wait(f"{j['username']}~{j['name']}", timeout=60)


def preempt(admin: Api, job_id: str, reason: str) -> None:
    r = admin.http.post(f"/api/v2/local/jobs/{job_id}/preempt", json={"reason": reason})
    assert r.status_code == 200, r.text


def listed(env: Env, job_id: str) -> dict[str, Any]:
    """The job's row of the Jupyter server's list (``pai/api/jobs``, Alice's profile)."""
    r = env.jupyter.http().get("pai/api/jobs")
    assert r.status_code == 200, r.text
    return next(j for j in r.json()["jobs"] if j["id"] == job_id)


def runs_again(env: Env, job_id: str) -> bool | None:
    """Whether the job runs again, not being preempted (its next attempt); None (wait on) when not."""
    row = listed(env, job_id)
    return (row["state"] == "RUNNING" and not row["preempting"]) or None


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("lab-preempt")
    with servers(tmp) as s:
        admin = s.daemon(cpus=2)
        alice = admin.new_user("alice")
        upsert_profile(Profile(name="alice", url=admin.url, username="alice", token=alice.token), admin.home)
        jupyter = s.jupyter(lab=True, lab_settings={"refreshSeconds": 1})
        assert jupyter.http().put("pai/api/profiles/current", json={"name": "alice"}).status_code == 200
        yield Env(admin, alice, jupyter)
        stop_all(admin)


@pytest.fixture
def lab_page(env: Env, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from open_lab_page(browser, env.jupyter, request)


@pytest.mark.browser
def test_the_owner_is_told_in_the_lab_when_an_admin_preempts_her_interactive_job(env: Env, lab_page: Any) -> None:
    session = env.alice.submit_ok(job("lab-kernel", "trap '' TERM; sleep 600"))  # (saving takes its whole grace)
    env.alice.wait(session, {"RUNNING"}, timeout=60)
    lab_page.get_by_text("lab-kernel").first.wait_for(timeout=60_000)  # (the sidebar's list has it: a baseline)
    preempt(env.admin, session, "node maintenance")
    told = lab_page.get_by_text("PAI job lab-kernel is being preempted").first
    told.wait_for(timeout=30_000)
    text = told.inner_text()
    assert "node maintenance (root)" in text and "SIGTERM, SIGKILL 20 s later" in text, text
    assert "Save your work" in text, text  # (a Lab notification shows 140 characters)
    assert env.alice.detail(session)["jobStatus"]["state"] == "RUNNING"  # told within its grace
    # after its grace it waits again and runs as its next attempt (the CPUs are free): not a second preemption
    wait_for(lambda: runs_again(env, session), 60, "the next attempt to run")
    lab_page.wait_for_timeout(4_000)  # (four lists of the sidebar, each polled each second)
    assert lab_page.get_by_text("PAI job lab-kernel is being preempted").count() == 1
    stop_all(env.alice)


def test_the_lab_list_says_which_job_is_being_preempted(env: Env) -> None:
    """``preempting`` in the Jupyter server's list: during the grace only, not for the next attempt. The task's
    own log says it too (where a kernel's or a Lab's owner reads it)."""
    stop_all(env.alice)
    session = env.alice.submit_ok(job("srv-kernel", "trap '' TERM; sleep 600"))
    env.alice.wait(session, {"RUNNING"}, timeout=60)
    assert listed(env, session)["preempting"] is False
    assert env.alice.http.post(f"/api/v2/local/jobs/{session}/preempt", json={}).status_code == 403  # (the owner)
    preempt(env.admin, session, "node maintenance")
    row = listed(env, session)
    assert row["preempting"] is True and row["state"] == "RUNNING" and row["appExitCode"] == -1003, row
    diagnostics = env.jupyter.http().get(f"pai/api/jobs/{session}").json()["diagnostics"]
    assert diagnostics == "node maintenance (root); its tasks get SIGTERM, SIGKILL 20 s later", diagnostics
    told = env.alice.log(session, name="runtime", attempt=0)
    assert f"[pai_jupyter] {diagnostics}: this session ends then; save your work" in told, told
    wait_for(lambda: runs_again(env, session), 60, "the next attempt to run")
    assert listed(env, session)["appExitCode"] is None  # the outcome is the preempted attempt's, not the job's
    stop_all(env.alice)
