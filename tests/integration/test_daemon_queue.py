"""On a real daemon with 2 CPUs: a 2-task gang job at the head and ten 1-task
jobs behind it; the small jobs run in the gaps while a job holds the other CPU, the gang job starts all its tasks
at once when the CPUs come back (never later than the time reserved for it), and a job given a higher priority
class goes ahead of the line."""

from __future__ import annotations

import json

import pytest

from tests.helpers.daemon import Api, v1

pytestmark = pytest.mark.slow


def job(name: str, command: str, minutes: float, tasks: int = 1, priority: str | None = None) -> str:
    doc = json.loads(v1(name, command, taskNumber=tasks))
    doc["extras"] = {"maxRunTimeMinutes": minutes}
    if priority:
        doc["extras"]["hivedScheduler"] = {"jobPriorityClass": priority}
    return json.dumps(doc)


def test_small_jobs_run_in_the_gaps_of_a_waiting_gang_job(two_cpus: Api) -> None:
    api = two_cpus
    blocker = api.submit_ok(job("blocker", "sleep 6", 0.25))  # holds 1 CPU, for 15 s at the most
    api.wait(blocker, ("RUNNING",))
    gang = api.submit_ok(job("gang", "sleep 1", 1, tasks=2))
    small = [api.submit_ok(job(f"small{i}", "sleep 1", 0.05)) for i in range(10)]  # 3 s at the most
    urgent = api.submit_ok(job("urgent", "sleep 1", 0.05, priority="prod"))
    done = {j: api.wait(j, timeout=120)["jobStatus"] for j in (blocker, gang, *small, urgent)}
    assert {s["state"] for s in done.values()} == {"SUCCEEDED"}
    b, g = done[blocker], done[gang]
    before = [j for j in small if done[j]["completedTime"] <= g["launchedTime"]]
    assert len(before) >= 2, "small jobs should have run in the gap beside the blocker"
    # the gang job starts once the blocker's CPU is back and the gap job there ends (<= its 3 s), and long
    # before the time reserved for it (the blocker's deadline, 15 s after its start)
    assert g["launchedTime"] - b["completedTime"] <= 3_000
    assert g["launchedTime"] <= b["launchedTime"] + 15_000
    tasks = api.detail(gang)["taskRoles"]["main"]["taskStatuses"]
    starts = [t["launchedTime"] for t in tasks]
    assert len(starts) == 2 and max(starts) - min(starts) < 1_000  # both at once: gang allocation
    # prod goes ahead of the default class: the urgent job ran before the gang job and the last small jobs
    assert done[urgent]["launchedTime"] <= g["launchedTime"]
    assert done[urgent]["launchedTime"] <= done[small[-1]]["launchedTime"]


def test_the_queue_says_when_its_head_starts_at_the_latest(two_cpus: Api) -> None:
    """The head's reservation is its start estimate (``startEstimate``): the running job's deadline; a job behind it,
    and a head whose blocker has no max run time, have none."""
    api = two_cpus
    blocker = api.submit_ok(job("blocker", "sleep 600", 10, tasks=2))  # both CPUs, for 10 minutes at the most
    api.wait(blocker, ("RUNNING",))
    head = api.submit_ok(job("head", "true", 1))
    behind = api.submit_ok(job("behind", "true", 1, tasks=2))
    line = api.http.get("/api/v2/local/queue").json()["virtualClusters"]["default"]
    estimates = {f"{j['username']}~{j['name']}": j["startEstimate"] for j in line}
    deadline = api.detail(blocker)["jobStatus"]["launchedTime"] + 10 * 60_000
    assert abs(estimates[head] - deadline) < 2_000 and estimates[behind] is None, (estimates, deadline)
    api.stop(blocker)
    assert api.wait(head, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
    endless = api.submit_ok(v1("endless", "sleep 600", taskNumber=2))  # no max run time: no reservation
    api.wait(endless, ("RUNNING",))
    waiting = api.submit_ok(job("waiting", "true", 1))
    line = api.http.get("/api/v2/local/queue").json()["virtualClusters"]["default"]
    assert [j["startEstimate"] for j in line if j["name"] == "waiting"] == [None]
    api.stop(endless)
    api.wait(waiting, timeout=60)
