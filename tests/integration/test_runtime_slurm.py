"""The Slurm backend on a real two-node cluster (tests/slurm/cluster.sh): OpenPAI's semantics as on the other
runtimes (bash strict options, exit codes, completion policy, stop), and a 2-role job across both nodes whose
workers reach ps through PAI_HOST_IP_*/PAI_PORT_LIST_*."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.cluster.paths import read_runtime
from tests.helpers.daemon import Api, start_daemon
from tests.helpers.slurm_jobs import PS, WORKER, job, role

from ..polling import wait_for
from ..slurm.fixture import node_addrs

pytestmark = [pytest.mark.slurm]


@pytest.mark.parametrize(
    ("command", "state", "code"),
    [
        ("echo before; false; echo after", "FAILED", 1),
        ("echo $PAI_NEVER_SET; echo after", "FAILED", 1),
        ("false | cat; echo after", "FAILED", 1),
        ("exit 7", "FAILED", 7),
        ("kill -TERM $$", "FAILED", 143),  # 128 + the signal, as on the process runtime
        ("kill -9 $$", "FAILED", 137),
        ("echo fine", "SUCCEEDED", 0),
    ],
)
def test_commands_run_under_bash_strict_options_with_their_exit_codes(
    slurm: Api, command: str, state: str, code: int
) -> None:
    name = slurm.submit_ok(job("strict", {"main": role(command)}))
    detail = slurm.wait(name, timeout=60)
    assert detail["jobStatus"]["state"] == state, detail
    task = slurm.tasks(detail)[0]
    assert task["containerExitCode"] == code, task
    assert "after" not in slurm.log(name, name="stdout")


def test_a_ps_and_two_workers_run_across_both_nodes_and_meet(slurm: Api) -> None:
    roles = {
        "ps": role('python3 -c "$ps_code"', ports=1),
        "worker": role('python3 -c "$worker_code"', instances=2, ports=1),
    }
    name = slurm.submit_ok(job("dist", roles, parameters={"ps_code": PS, "worker_code": WORKER}))
    detail = slurm.wait(name, timeout=90)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    ps = slurm.log(name, role="ps", name="stdout")
    assert ps.count("ps got worker") == 2, ps
    ips = {line.rsplit(" ", 1)[-1] for line in ps.splitlines()}
    tasks = slurm.tasks(detail, "ps") + slurm.tasks(detail, "worker")
    # three tasks of one core each on two nodes of two cores: both nodes ran some
    placed = set()
    for role_name, index in (("ps", 0), ("worker", 0), ("worker", 1)):
        text = Path(slurm.home) / "local" / "jobs" / name / f"a0.{role_name}-{index}.t0" / "run" / "placement"
        placed.add(text.read_text().split()[0])
    assert placed == {"n1", "n2"}, placed
    assert all(t["taskState"] == "SUCCEEDED" for t in tasks)
    assert ips <= set(node_addrs().values()), ips
    # the nodes' own connections take ports from the ephemeral range: the tasks' stay below it (taskPorts)
    ports = [int(p) for t in tasks for v in t["containerPorts"].values() for p in v.split(",")]
    assert len(ports) == 3 and all(20000 <= p <= 29999 for p in ports), ports


def test_openpais_node_list_is_the_slurm_clusters_nodes(slurm: Api) -> None:
    """``GET /api/v2/kubernetes/nodes`` (OpenPAI's JS SDK's getK8sNodes) lists Slurm's nodes, not the daemon's host."""
    nodes = slurm.http.get("/api/v2/kubernetes/nodes").json()["items"]
    assert [n["metadata"]["name"] for n in nodes] == ["n1", "n2"], nodes
    addrs = node_addrs()  # (the cluster's slot decides its subnet)
    for n in nodes:  # tests/slurm/cluster.sh: CPUs=2 RealMemory=4000 Gres=gpu:2 each
        assert n["status"]["capacity"] == {"cpu": "2", "memory": "4000Mi", "nvidia.com/gpu": "2", "pods": "110"}
        assert n["status"]["conditions"] == [{"type": "Ready", "status": "True"}], n
        assert n["status"]["addresses"][0]["address"] == addrs[n["metadata"]["name"]], (n, addrs)


def stop_once_started(api: Api, name: str) -> tuple[dict[str, Any], float]:
    """Stop job ``name`` once its first task printed "started"; its detail after it ended, and the seconds from the
    stop to that end."""
    api.wait(name, states={"RUNNING"}, timeout=30)
    wait_for(lambda: "started" in api.log(name, name="stdout"), 30, f"{name} to print 'started'")
    began = time.monotonic()
    assert api.stop(name).status_code in (200, 202)
    detail = api.wait(name, timeout=60)
    return detail, time.monotonic() - began


def test_stop_cancels_the_slurm_job_and_the_job_is_stopped(slurm: Api) -> None:
    name = slurm.submit_ok(job("long", {"main": role("echo started; sleep 300", instances=2)}))
    detail, took = stop_once_started(slurm, name)
    assert detail["jobStatus"]["state"] == "STOPPED", detail
    assert all(t["taskState"] == "STOPPED" for t in slurm.tasks(detail)), slurm.tasks(detail)
    assert took < 20


def test_the_completion_policy_ends_the_job_when_its_minimum_succeeded(slurm: Api) -> None:
    roles = {"main": role("exit 0", completion={"minSucceededInstances": 1}), "side": role("sleep 300")}
    name = slurm.submit_ok(job("policy", roles))
    detail = slurm.wait(name, timeout=60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    assert slurm.tasks(detail, "side")[0]["taskState"] == "STOPPED", slurm.tasks(detail, "side")


def test_a_failed_task_fails_the_job_with_its_exit_code(slurm: Api) -> None:
    roles = {"main": role("exit 3"), "side": role("sleep 300")}
    name = slurm.submit_ok(job("fails", roles))
    detail = slurm.wait(name, timeout=60)
    assert detail["jobStatus"]["state"] == "FAILED", detail
    assert slurm.tasks(detail)[0]["containerExitCode"] == 3
    assert slurm.tasks(detail, "side")[0]["taskState"] == "STOPPED"


def test_a_killed_daemon_reattaches_to_its_slurm_jobs_by_their_ids(slurm: Api) -> None:
    name = slurm.submit_ok(job("survives", {"main": role("sleep 4; echo done $SLURM_JOB_ID", instances=2)}))
    detail = slurm.wait(name, states={"RUNNING"}, timeout=30)
    os.kill(read_runtime(slurm.home)["pid"], signal.SIGKILL)
    again = start_daemon(slurm.home, runtime="slurm")
    detail = again.wait(name, timeout=60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    slurm_id = again.tasks(detail)[0]["containerId"]
    assert again.log(name, name="stdout") == f"done {slurm_id}\n"  # the job it submitted, once
    assert again.log(name, index=1, name="stdout") == f"done {slurm_id}\n"


def test_stop_ends_a_task_that_ignores_sigterm_after_slurms_kill_wait(slurm: Api) -> None:
    name = slurm.submit_ok(job("stubborn", {"main": role("trap '' TERM; echo started; while :; do sleep 1; done")}))
    detail, took = stop_once_started(slurm, name)
    assert detail["jobStatus"]["state"] == "STOPPED", detail
    assert slurm.tasks(detail)[0]["taskState"] == "STOPPED"
    assert took < 20  # the test cluster's KillWait is 2 s


def test_stopping_a_job_slurm_holds_pending_cancels_it_there(slurm: Api) -> None:
    full = slurm.submit_ok(job("full", {"main": role("sleep 300", instances=4)}))
    slurm.wait(full, states={"RUNNING"}, timeout=60)
    held = slurm.submit_ok(job("held", {"main": role("echo ran")}))
    wait_for(lambda: "pending in Slurm" in str(slurm.detail(held)["jobStatus"]["waitingReason"]), 30)
    slurm_id = slurm.tasks(slurm.detail(held))[0]["containerId"]
    assert slurm.stop(held).status_code in (200, 202)
    detail = slurm.wait(held, timeout=60)
    assert detail["jobStatus"]["state"] == "STOPPED", detail
    state = subprocess.run(["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%T"], capture_output=True, text=True)
    assert state.stdout.strip() == "CANCELLED", state
    slurm.stop(full)
    assert slurm.wait(full, timeout=60)["jobStatus"]["state"] == "STOPPED"
    assert slurm.log(held, name="stdout") == ""  # it never ran


def test_image_recorded_clone_and_delete_as_on_the_other_runtimes(slurm: Api) -> None:
    name = slurm.submit_ok(job("orig", {"main": role("echo from $SLURM_JOB_ID")}))
    detail = slurm.wait(name, timeout=60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    assert slurm.tasks(detail)[0]["runtime"] == "slurm"
    note = (Path(slurm.home) / "local" / "jobs" / name / "a0.main-0.t0" / "runtime").read_text()
    assert "the image ubuntu is recorded but not used" in note, note
    r = slurm.http.post(f"/api/v2/jobs/{name}/clone", json={"name": "copy"})
    assert r.status_code == 202, r.text
    copy = slurm.wait(f"{name.split('~')[0]}~copy", timeout=60)
    assert copy["jobStatus"]["state"] == "SUCCEEDED", copy
    assert slurm.tasks(copy)[0]["containerId"] != slurm.tasks(detail)[0]["containerId"]  # a Slurm job of its own
    job_dir = Path(slurm.home) / "local" / "jobs" / name
    assert job_dir.exists()
    assert slurm.http.delete(f"/api/v2/jobs/{name}").status_code in (200, 202, 204)
    assert slurm.http.get(f"/api/v2/jobs/{name}").status_code == 404
    assert not job_dir.exists()


def test_a_task_larger_than_any_node_is_refused_in_one_sentence(slurm: Api, kernelspecs: Path) -> None:
    """The "Python on PAI" kernel's 4096 MB fit the two nodes' 8000 MB together but neither node's 4000 MB: Slurm's
    sbatch refused it at start, and Lab showed two raw sbatch errors cut at the dialog's edge. The daemon knows
    each node (sinfo) and refuses such a job at submit, in one sentence, before Slurm sees it."""
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from pai_jupyter.kernel.kernelspec import install
    from pai_jupyter.kernel.provisioner import KernelStartError

    said = "a task needs 1 CPU, 4096 MB memory, 0 GPU, more than one node has (each of its 2 nodes has 2 CPU, 4000 MB"
    big = role("true") | {"resourcePerInstance": {"cpu": 1, "memoryMB": 4096, "gpu": 0}}
    r = slurm.submit(job("too-big", {"main": big}))
    assert r.status_code == 400 and said in r.json()["message"], r.text
    install("pai-test")  # the kernel's defaults: 1 CPU, 4096 MB
    with pytest.raises(KernelStartError) as err:
        asyncio.run(AsyncKernelManager(kernel_name="pai-test").start_kernel())
    message = str(err.value)
    assert said in message and "sbatch" not in message and message.count(". ") == 0, message
    assert not slurm.http.get("/api/v2/jobs").json()  # nothing was queued, nothing reached Slurm
