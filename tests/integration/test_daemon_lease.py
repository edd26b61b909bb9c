"""A job's lease on the real daemon (``extras.com.pai_jupyter.lease``, ``PUT .../lease``): a job whose holder
stops renewing is STOPPED with the holder's reason, waiting or running; renewals keep it; owner or admin only;
a job without a lease, an ended job and a malformed lease are refused."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.helpers.daemon import Api, v1


def leased(name: str, seconds: float, command: str = "sleep 600", **role: Any) -> str:
    job = json.loads(v1(name, command, **role))
    job["extras"] = {"com.pai_jupyter.lease": {"seconds": seconds, "reason": "its holder went away"}}
    return json.dumps(job)


def renew(api: Api, job: str) -> Any:
    return api.http.put(f"/api/v2/local/jobs/{job}/lease")


def test_an_unrenewed_lease_stops_the_job_with_its_reason(daemon: Api) -> None:
    """The reason is the job's and its attempt's exit diagnostics, with OpenPAI's exit code of a stopped
    framework (-210, StopFrameworkRequested): a kernel job whose Jupyter server went away showed exitCode and
    exitDiagnostics null, the reason only in its events."""
    job = daemon.submit_ok(leased("lapsing", 2))
    detail = daemon.wait(job, {"STOPPED"}, timeout=30)
    reason = "stopped: its holder went away (not renewed for 2 s)"
    status = detail["jobStatus"]
    assert (status["appExitDiagnostics"], status["appExitCode"], status["appExitType"]) == (reason, -210, "Failed")
    assert (status["appExitSpec"]["phrase"], status["appExitSpec"]["type"]) == ("StopFrameworkRequested", "USER_STOP")
    [attempt] = daemon.http.get(f"/api/v2/jobs/{job}/job-attempts").json()
    assert (attempt["exitCode"], attempt["exitPhrase"], attempt["exitDiagnostics"]["diagnosticsSummary"]) == (
        -210,
        "StopFrameworkRequested",
        reason,
    )
    r = renew(daemon, job)
    assert r.status_code == 409 and r.json()["code"] == "ConflictJobError" and "STOPPED" in r.json()["message"]


def test_renewals_keep_the_job_and_a_waiting_job_lapses_too(daemon: Api) -> None:
    job = daemon.submit_ok(leased("renewed", 4))
    blocked = daemon.submit_ok(leased("waiting", 2, cpuNumber=8))  # the daemon has 8 CPUs: it waits behind `job`
    started = time.monotonic()
    while time.monotonic() - started < 9:  # over two leases, renewed every half second
        r = renew(daemon, job)
        assert r.status_code == 200, r.text
        assert r.json()["seconds"] == 4 and r.json()["expires"] > time.time()
        assert daemon.detail(job)["jobStatus"]["state"] == "RUNNING"
        time.sleep(0.5)
    waited = daemon.wait(blocked, {"STOPPED"}, timeout=1)  # never renewed: stopped while it waited
    assert "not renewed for 2 s" in waited["jobStatus"]["appExitDiagnostics"]
    assert daemon.wait(job, {"STOPPED"}, timeout=30)["jobStatus"]["appExitDiagnostics"].startswith(
        "stopped: its holder went away"
    )


def test_who_may_renew_and_what_is_refused(daemon: Api) -> None:
    plain = daemon.submit_ok(v1("plain", "sleep 600"))
    r = renew(daemon, plain)
    assert r.status_code == 409 and "declares no lease" in r.json()["message"]
    job = daemon.submit_ok(leased("mine", 60))
    bob = daemon.new_user("bob", password="hunter22")
    assert renew(bob, job).status_code == 404  # someone else's job is as absent as a missing one
    assert renew(daemon.as_user("not-a-token"), job).status_code == 401
    assert renew(daemon, job).status_code == 200
    for bad in ({"seconds": 0}, {"seconds": "60"}, {"seconds": 60, "reason": 3}, {"reason": "x"}, [60]):
        doc = json.loads(leased("bad", 60))
        doc["extras"]["com.pai_jupyter.lease"] = bad
        r = daemon.submit(json.dumps(doc))
        assert r.status_code == 400 and "com.pai_jupyter.lease" in r.text, (bad, r.text)
    for name in (plain, job):
        assert daemon.stop(name).status_code == 202
