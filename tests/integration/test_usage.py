"""Usage per user and virtual cluster (``GET /api/v2/local/usage``, ``Client.usage``, ``pai usage``) on a real
daemon (process runtime, 2 scheduled GPUs, a second virtual cluster): two users' short GPU jobs are counted from the
tasks' own recorded times; a user sees their own rows and the virtual clusters' totals (which name nobody), never
another user's rows; an admin sees everyone's; a request without a token is refused. The Lab's capacity view gets
the same rows through its server (``pai/api/capacity``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pai_jupyter.client import Client, Profile
from pai_jupyter.cluster import control
from tests.helpers.cli import pai
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1
from tests.helpers.servers import servers

HOUR_MS = 3_600_000
TOLERANCE_H = 2e-4  # the answer rounds hours to 4 places


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Api]:
    home = tmp_path / "pai-home"
    (home / "local").mkdir(parents=True)
    (home / "local" / "cluster.yaml").write_text("virtualClusters:\n  research: {cpu: 2, memoryMB: 2048, gpu: 1}\n")
    api = start_daemon(home, cpus=8, memory_mb=16384, gpus=2)
    try:
        yield api
    finally:
        control.stop(home)
        kill_leftovers(home)


def job(name: str, command: str, vc: str = "default", **role: Any) -> str:
    doc = json.loads(v1(name, command, **role))
    doc["virtualCluster"] = vc
    return json.dumps(doc)


def held(api: Api, jobs: dict[str, tuple[int, int, int]]) -> dict[str, float]:
    """GPU-, CPU- and memory-hours the jobs' tasks held (``jobs``: each one's gpu, cpu, memoryMB per task), from the
    tasks' own launch and completion times."""
    out = {"gpu": 0.0, "cpu": 0.0, "mem": 0.0}
    for j, (gpu, cpu, memory_mb) in jobs.items():
        for role in api.detail(j)["taskRoles"].values():
            for t in role["taskStatuses"]:
                hours = (t["completedTime"] - t["launchedTime"]) / HOUR_MS
                out["gpu"] += gpu * hours
                out["cpu"] += cpu * hours
                out["mem"] += memory_mb / 1024 * hours
    return out


def rows_of(answer: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["username"], r["virtualCluster"]): r for r in answer["rows"]}


def test_usage_counts_each_users_jobs_and_shows_a_user_only_their_own(cluster: Api, tmp_path: Path) -> None:
    admin = cluster
    alice, bob = admin.new_user("alice"), admin.new_user("bob")
    a1 = alice.submit_ok(job("a1", "sleep 1.5", gpuNumber=1))
    a2 = alice.submit_ok(job("a2", "sleep 1", vc="research", gpuNumber=1, cpuNumber=2, memoryMB=512))
    b1 = bob.submit_ok(job("b1", "sleep 1", gpuNumber=1))
    for api, j in ((alice, a1), (alice, a2), (bob, b1)):
        assert api.wait(j, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"

    mine = alice.http.get("/api/v2/local/usage")
    assert mine.status_code == 200, mine.text
    answer = mine.json()
    assert answer["windowHours"] == 168 and answer["allUsers"] is False
    rows = rows_of(answer)
    assert set(rows) == {("alice", "default"), ("alice", "research")}  # bob's are not there
    res = {a1: (1, 1, 256), a2: (1, 2, 512), b1: (1, 1, 256)}  # (the v1 helper's cpu and memory unless given)
    for key, jobs in {("alice", "default"): [a1], ("alice", "research"): [a2]}.items():
        want, got = held(admin, {j: res[j] for j in jobs}), rows[key]
        assert got["gpuHoursAllocated"] == pytest.approx(want["gpu"], abs=TOLERANCE_H)
        assert got["cpuHours"] == pytest.approx(want["cpu"], abs=TOLERANCE_H)
        assert got["memoryGBHours"] == pytest.approx(want["mem"], abs=TOLERANCE_H)
        assert got["gpuHoursAllocated"] > 0
        assert got["gpuHoursUsed"] is None and got["gpuHoursIdle"] is None  # no GPU samples: unknown, not 0
        assert got["jobsStarted"] == 1 and got["attemptsStarted"] == 1
        assert 0 <= got["waitMeanSeconds"] <= got["waitMaxSeconds"] < 30
        assert got["fairShareUsage"] > 0  # fair share's decayed use, the user's (the same on each of their rows)
    assert rows[("alice", "default")]["fairShareUsage"] == rows[("alice", "research")]["fairShareUsage"]
    assert answer["fairShare"] == {"halfLifeHours": 24.0}
    # the virtual clusters' totals cover everyone and name nobody
    totals = {t["virtualCluster"]: t for t in answer["virtualClusters"]}
    assert totals["default"]["users"] == 2 and totals["research"]["users"] == 1
    assert all("username" not in t for t in answer["virtualClusters"])
    everyone = held(admin, {j: res[j] for j in (a1, b1)})["gpu"]
    assert totals["default"]["gpuHoursAllocated"] == pytest.approx(everyone, abs=2 * TOLERANCE_H)
    assert "bob" not in mine.text

    # another user's rows: refused to a user, given to an admin
    refused = alice.http.get("/api/v2/local/usage", params={"user": "bob"})
    assert refused.status_code == 403 and refused.json()["code"] == "ForbiddenUserError"
    assert alice.http.get("/api/v2/local/usage", params={"user": "alice"}).json()["rows"] == answer["rows"]
    full = admin.http.get("/api/v2/local/usage").json()
    assert full["allUsers"] is True and set(rows_of(full)) == {*rows, ("bob", "default")}
    only_bob = admin.http.get("/api/v2/local/usage", params={"user": "bob"}).json()
    assert set(rows_of(only_bob)) == {("bob", "default")}
    assert rows_of(only_bob)[("bob", "default")]["gpuHoursAllocated"] == pytest.approx(
        held(admin, {b1: res[b1]})["gpu"], abs=TOLERANCE_H
    )

    # no token, a wrong token, a bad window
    assert httpx.get(admin.url + "/api/v2/local/usage").status_code == 401
    assert alice.as_user("nope").http.get("/api/v2/local/usage").status_code == 401
    for bad in ("0", "-1", "nan", "week", "9000"):
        refused = alice.http.get("/api/v2/local/usage", params={"window": bad})
        assert refused.status_code == 400, (bad, refused.text)
    # a window that ends after the jobs did: they are outside it
    assert alice.http.get("/api/v2/local/usage", params={"window": 1e-7}).json()["rows"] == []

    # the client's typed answer, as alice
    client = Client(Profile("alice", url=admin.url, username="alice", token=alice.token))
    usage = client.usage(window_hours=24)
    assert usage.window_hours == 24 and not usage.all_users
    assert {(r.username, r.virtual_cluster) for r in usage.rows} == set(rows)
    assert {t.virtual_cluster: t.users for t in usage.virtual_clusters} == {"default": 2, "research": 1}
    assert usage.rows[0].gpu_hours_used is None

    # pai usage, as the cluster's owner (an admin: everyone's rows, then the totals)
    cli = pai("usage", home=admin.home)
    assert cli.returncode == 0, cli.stderr
    lines = cli.stdout.splitlines()
    assert lines[0] == "Usage over the last 7 days:" and lines[1].split()[:3] == ["USER", "VC", "GPU-H"]
    assert [ln.split()[:2] for ln in lines[2:5]] == [["alice", "default"], ["alice", "research"], ["bob", "default"]]
    assert any(ln.startswith("(all 2)") for ln in lines) and "not sampled" in cli.stderr
    cli = pai("usage", "--user", "bob", "--window", "24h", "--json", home=admin.home)
    assert cli.returncode == 0, cli.stderr
    data = json.loads(cli.stdout)
    assert data["windowHours"] == 24 and [row["username"] for row in data["rows"]] == ["bob"]
    cli = pai("usage", "--window", "soon", home=admin.home)
    assert cli.returncode == 2 and "24h, 7d or 90m" in cli.stderr


@pytest.mark.slow
def test_the_labs_capacity_answer_carries_the_usage(tmp_path: Path) -> None:
    with servers(tmp_path) as s:
        api = s.daemon(gpus=1)
        done = api.submit_ok(job("lab-usage", "sleep 1", gpuNumber=1))
        jupyter = s.jupyter()
        assert api.wait(done, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
        assert jupyter.http(None).get("pai/api/capacity").status_code == 403
        r = jupyter.http().get("pai/api/capacity")
        assert r.status_code == 200, r.text
        usage = r.json()["usage"]
        assert usage["windowHours"] == 168 and "not sampled" in usage["gpuUseMessage"]
        me = api.detail(done)["jobStatus"]["username"]
        mine = [row for row in usage["rows"] if row["username"] == me]
        total = [row for row in usage["rows"] if row["username"] is None]
        assert len(mine) == 1 and len(total) == 1 and total[0]["users"] == 1
        want = held(api, {done: (1, 1, 256)})["gpu"]
        assert mine[0]["gpuHoursAllocated"] == pytest.approx(want, abs=TOLERANCE_H) and want > 0
        assert mine[0]["gpuHoursUsed"] is None and mine[0]["jobsStarted"] == 1
