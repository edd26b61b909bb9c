"""PUT .../maxRunTime ("set work duration") on the real daemon: the watchdog stops the job after the new
limit with the reason; owner or admin only; bad values and ended jobs are refused."""

from __future__ import annotations

import time

from pai_jupyter.protocol.rules import run_time_problem
from tests.helpers.daemon import Api, v1


def _put(api: Api, job: str, body: object) -> object:
    return api.http.put(f"/api/v2/local/jobs/{job}/maxRunTime", json=body)


def test_new_duration_stops_a_running_job_with_the_reason(daemon: Api) -> None:
    name = daemon.submit_ok(v1("worker", "sleep 120"))
    daemon.wait(name, states=("RUNNING",))
    r = _put(daemon, name, {"minutes": 0.02})
    assert r.status_code == 200, r.text
    assert r.json()["minutes"] == 0.02 and r.json()["deadline"] is not None
    d = daemon.wait(name, timeout=20)
    assert d["jobStatus"]["state"] == "STOPPED"
    assert "max run time of 0.02 minutes" in d["jobStatus"]["appExitDiagnostics"]
    events = daemon.http.get(f"/api/v2/jobs/{name}/events").json()
    assert any("max run time set to 0.02 minutes by" in e.get("message", "") for e in events["data"])
    # an ended job keeps its end: 409, and the stored reason is unchanged
    r = _put(daemon, name, {"minutes": 5})
    assert r.status_code == 409 and r.json()["code"] == "JobNotRunningError"


def test_a_longer_duration_keeps_the_job_running(daemon: Api) -> None:
    """The new limit replaces the submitted one (durably, in the stored model): 0.02 -> 60 minutes."""
    import json

    job = json.loads(v1("longer", "sleep 120"))
    job["extras"] = {"maxRunTimeMinutes": 0.05}  # 3 s
    name = daemon.submit_ok(json.dumps(job))
    daemon.wait(name, states=("RUNNING",))
    assert _put(daemon, name, {"minutes": 60}).status_code == 200
    launched = daemon.detail(name)["jobStatus"]["appLaunchedTime"]
    while time.time() * 1000 - launched < 6000:  # twice the old limit has passed: still running
        assert daemon.detail(name)["jobStatus"]["state"] == "RUNNING"
        time.sleep(0.2)
    assert daemon.stop(name).status_code == 202
    daemon.wait(name)


def test_auth_owner_or_admin_and_values(daemon: Api) -> None:
    name = daemon.submit_ok(v1("mine", "sleep 120"))
    daemon.wait(name, states=("RUNNING",))
    r = daemon.http.post("/api/v2/local/users", json={"name": "bob", "password": "hunter22"})
    assert r.status_code == 201, r.text
    bob = daemon.as_user(r.json()["token"])
    r = _put(bob, name, {"minutes": 1})
    assert r.status_code == 404  # someone else's job is as absent as a missing one
    anon = daemon.as_user("not-a-token")
    assert _put(anon, name, {"minutes": 1}).status_code == 401
    for bad in ({"minutes": 0}, {"minutes": -3}, {"minutes": "5"}, {"minutes": True}, {}, {"minutes": 10**9}):
        r = _put(daemon, name, bad)
        assert r.status_code == 400, (bad, r.text)
        assert str(run_time_problem(bad.get("minutes"))) in r.json()["message"]  # the document's rule and words
    assert _put(daemon, "alice~nope", {"minutes": 1}).status_code == 404
    bob_job = bob.submit_ok(v1("bobs", "sleep 120"))
    assert _put(daemon, bob_job, {"minutes": 30}).status_code == 200  # the daemon's owner is an admin
    for job in (name, bob_job):
        daemon.stop(job)
        daemon.wait(job)
