"""The Slurm backend's view of where and why: a job Slurm holds pending is WAITING with Slurm's reason and its place
in the partition's queue as "why waiting"; each task's node, IP and GPUs (Slurm's gres) in the task table; the
files a task can write in its Slurm directories (run/placement, rdv/) are never followed by root."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import read_runtime
from tests.helpers.daemon import Api, start_daemon
from tests.helpers.slurm_jobs import job, role

from ..polling import wait_for
from ..slurm.fixture import node_addrs

pytestmark = [pytest.mark.slurm]


def _reason(api: Api, name: str) -> str:
    detail = api.detail(name)
    return str(detail["jobStatus"]["waitingReason"] or "") if detail["jobStatus"]["state"] == "WAITING" else ""


def test_a_job_slurm_holds_pending_waits_with_slurms_reason_and_its_place_in_the_queue(slurm: Api) -> None:
    # four one-core tasks fill both two-core nodes
    full = slurm.submit_ok(job("full", {"main": role("sleep 300", instances=4)}))
    slurm.wait(full, states={"RUNNING"}, timeout=60)
    first = slurm.submit_ok(job("first", {"main": role("echo first ran")}))
    second = slurm.submit_ok(job("second", {"main": role("echo second ran")}))
    said = lambda n: "ahead" in (r := _reason(slurm, n)) and "weighed" not in r  # noqa: E731
    wait_for(lambda: said(first) and said(second), 30, lambda: f"Slurm's reasons: {_reason(slurm, first)}")
    assert slurm.detail(first)["jobStatus"]["state"] == "WAITING"
    assert all(t["taskState"] == "WAITING" for t in slurm.tasks(slurm.detail(first)))
    reason = _reason(slurm, first)
    assert "pending in Slurm" in reason and "Resources" in reason, reason
    assert "0 jobs ahead in partition 'debug'" in reason, reason
    assert "1 job ahead in partition 'debug'" in _reason(slurm, second), _reason(slurm, second)
    slurm.stop(full)
    for name in (first, second):
        detail = slurm.wait(name, timeout=60)
        assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
        assert detail["jobStatus"]["waitingReason"] is None
        assert slurm.log(name, name="stdout").endswith("ran\n")


def test_the_task_table_shows_each_tasks_node_ip_and_slurms_gpus(slurm_cluster: str, pai_home: Path) -> None:
    # no capacity flags: the daemon takes the Slurm cluster's (2 nodes of 2 CPUs, 4000 MB and 2 fake GPUs each)
    slurm = start_daemon(pai_home, runtime="slurm", cpus=None, memory_mb=None, gpus=None)
    try:
        too_big = slurm.submit(job("toobig", {"main": role("true") | {"resourcePerInstance": _gpu(5)}}))
        assert too_big.status_code == 400 and "4 CPU, 8000 MB memory, 4 GPU in all" in too_big.text, too_big.text
        show = 'echo "$SLURMD_NODENAME ${CUDA_VISIBLE_DEVICES:-none}"; sleep 2'
        roles = {"ps": role(show), "worker": role(show, instances=2) | {"resourcePerInstance": _gpu(1)}}
        name = slurm.submit_ok(job("placed", roles))
        detail = slurm.wait(name, timeout=90)
        assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
        for role_name, index in (("ps", 0), ("worker", 0), ("worker", 1)):
            task = slurm.tasks(detail, role_name)[index]
            node, gpus = slurm.log(name, role=role_name, index=index, name="stdout").split()
            assert task["containerNodeName"] == node, (task, node)
            assert task["containerIp"] == node_addrs()[node], task
            expected = [] if gpus == "none" else [int(g) for g in gpus.split(",")]
            assert task["containerGpuIndices"] == expected, (task, gpus)
            assert len(expected) == (1 if role_name == "worker" else 0)
        events = slurm.http.get(f"/api/v2/jobs/{name}/events").json()
        started = [e["message"] for e in events["data"] if e["reason"] == "TaskStarted"]
        assert len(started) == 3 and all("on node n" in m for m in started), started
    finally:
        control.stop(pai_home)


def _gpu(n: int) -> dict[str, int]:
    return {"cpu": 1, "memoryMB": 256, "gpu": n}


def test_root_never_follows_a_placement_or_rendezvous_the_task_replaced_with_a_link(slurm: Api, tmp_path: Path) -> None:
    secret = tmp_path / "root-only"
    secret.write_text("evil 6.6.6.6 0\n")
    secret.chmod(0o600)
    # once the daemon has read them, the task swaps its run/placement and its attempt's rdv/ for links to a file
    # and a directory of root's
    plant = (
        f'sleep 2; rm -f run/placement && ln -s {secret} run/placement; rdv=$(dirname "$PWD")/slurm-a0/rdv; '
        f'rm -rf "$rdv" && ln -s {tmp_path} "$rdv"; echo planted; sleep 6'
    )
    name = slurm.submit_ok(job("planted", {"main": role(f"cd $PAI_TASK_DIR; {plant}")}))
    detail = slurm.wait(name, states={"RUNNING"}, timeout=60)
    ip = slurm.tasks(detail)[0]["containerIp"]
    assert ip in node_addrs().values()
    assert wait_for(lambda: "planted" in slurm.log(name, name="stdout") or None, 30)
    os.kill(read_runtime(slurm.home)["pid"], signal.SIGKILL)  # the restarted daemon reads the files again
    again = start_daemon(slurm.home, runtime="slurm")
    detail = again.wait(name, timeout=60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    task = again.tasks(detail)[0]
    assert task["containerIp"] == ip and task["containerNodeName"] in node_addrs(), task
    assert secret.read_text() == "evil 6.6.6.6 0\n" and secret.stat().st_mode & 0o777 == 0o600
    assert os.stat(tmp_path).st_uid == 0


def test_priority_classes_reach_slurm_as_nice_and_order_its_queue(slurm: Api) -> None:
    full = slurm.submit_ok(job("full", {"main": role("sleep 300", instances=4)}))
    slurm.wait(full, states={"RUNNING"}, timeout=60)
    low = slurm.submit_ok(job("low", {"main": role("true")}, extras={"hivedScheduler": {"jobPriorityClass": "oppo"}}))
    mid = slurm.submit_ok(job("mid", {"main": role("true")}))
    high = slurm.submit_ok(job("high", {"main": role("true")}, extras={"hivedScheduler": {"jobPriorityClass": "crit"}}))
    names = {"high": high, "mid": mid, "low": low}
    said = {k: lambda n=n: "ahead" in (r := _reason(slurm, n)) and "weighed" not in r for k, n in names.items()}
    wait_for(lambda: all(s() for s in said.values()), 30, lambda: str({k: _reason(slurm, n) for k, n in names.items()}))
    for ahead, key in enumerate(("high", "mid", "low")):  # Slurm's order, not the order they came in
        jobs = f"{ahead} job{'s' * (ahead != 1)}"
        assert f"; {jobs} ahead in partition" in _reason(slurm, names[key]), (key, _reason(slurm, names[key]))
    # an admin's new class for a job Slurm holds reaches Slurm (scontrol update ... Nice=): it passes mid and ties
    # with high (which of the two crit jobs goes first is Slurm's job id: the daemon may hand Slurm the three in
    # one scheduling pass, in any order)
    r = slurm.http.put(f"/api/v2/local/jobs/{low}/priority", json={"jobPriority": "crit"})
    assert r.status_code == 200, r.text
    wait_for(lambda: "; 2 jobs ahead" in _reason(slurm, mid), 30, lambda: _reason(slurm, mid))
    places = sorted(_reason(slurm, n).split("; ")[-1] for n in (low, high))
    assert places == ["0 jobs ahead in partition 'debug'", "1 job ahead in partition 'debug'"], places
    slurm.stop(full)
    for name in names.values():
        assert slurm.wait(name, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"


def test_a_virtual_cluster_is_a_slurm_partition(slurm_cluster: str, pai_home: Path) -> None:
    (pai_home / "local").mkdir(parents=True, exist_ok=True)
    quota = {"cpu": 4, "memoryMB": 8000, "gpu": 0}
    (pai_home / "local" / "cluster.yaml").write_text(json.dumps({"virtualClusters": {"debug": quota, "gpuq": quota}}))
    api = start_daemon(pai_home, runtime="slurm")
    try:
        ran = api.submit_ok(job("inpart", {"main": role("true")}, defaults={"virtualCluster": "debug"}))
        detail = api.wait(ran, timeout=60)
        assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
        slurm_id = api.tasks(detail)[0]["containerId"]
        part = subprocess.run(["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%P"], capture_output=True, text=True)
        assert part.stdout.strip() == "debug"
        # a virtual cluster the Slurm cluster has no partition for: Slurm refuses, and the job says so
        refused = api.submit_ok(job("nopart", {"main": role("true")}, defaults={"virtualCluster": "gpuq"}))
        detail = api.wait(refused, timeout=60)
        assert detail["jobStatus"]["state"] == "FAILED", detail
        said = api.tasks(detail)[0]["containerExitDiagnostics"]
        assert "Slurm refused the job" in said and "partition" in said.lower(), said
    finally:
        control.stop(pai_home)


def test_a_slurm_tasks_cpu_and_memory_reach_the_metrics(slurm: Api) -> None:
    """The job page's CPU and memory charts on Slurm: the task's wrapper samples its process group on its node."""
    busy = 'python3 -c "b = bytearray(96 << 20); exec(\\"while True: pass\\")"'
    name = slurm.submit_ok(job("busy", {"main": role(busy)}))
    slurm.wait(name, states={"RUNNING"}, timeout=60)
    seen: list[dict[str, object]] = []

    def burning() -> bool:
        seen[:] = slurm.http.get(f"/api/v2/local/jobs/{name}/metrics").json()["tasks"]
        cpu, memory = seen[0]["cpuPercent"], seen[0]["memoryBytes"]
        return isinstance(cpu, float) and cpu > 50 and isinstance(memory, int) and memory > 96 << 20

    wait_for(burning, 60, lambda: f"the busy task's CPU and memory in its metrics: {seen}")
    # not the daemon's own GPUs under the node's indices: the answer says none are sampled, and why
    gpu = slurm.http.get(f"/api/v2/local/jobs/{name}/metrics").json()["gpu"]
    assert gpu == {"available": False, "message": "GPU use is not sampled on the slurm runtime's nodes"}, gpu
    slurm.stop(name)
