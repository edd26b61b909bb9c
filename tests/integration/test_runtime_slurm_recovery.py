"""The Slurm backend when time passes and things break, on the real two-node cluster: a job's max run time counts
from when it runs (not while Slurm holds it pending), a failed attempt is retried as a new Slurm job, a slurmctld
restart loses nothing, and a node going down fails the job with Slurm's reason."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.daemon import Api
from tests.helpers.slurm_jobs import job, role

from ..polling import wait_for
from ..slurm.fixture import SCRIPT

pytestmark = [pytest.mark.slurm]


def test_the_max_run_time_counts_from_when_slurm_runs_the_job(slurm: Api) -> None:
    full = slurm.submit_ok(job("full", {"main": role("sleep 300", instances=4)}))
    slurm.wait(full, states={"RUNNING"}, timeout=60)
    timed = slurm.submit_ok(job("timed", {"main": role("echo ran; sleep 60")}, extras={"maxRunTimeMinutes": 0.05}))
    wait_for(lambda: "pending in Slurm" in str(slurm.detail(timed)["jobStatus"]["waitingReason"]), 30)
    held = slurm.detail(timed)
    assert held["jobStatus"]["state"] == "WAITING", held
    # held past its 3 s max run time while pending: it still waits, and runs once room frees
    wait_for(lambda: slurm.detail(timed)["jobStatus"]["submissionTime"] / 1000 + 5 < time.time(), 30)
    assert slurm.detail(timed)["jobStatus"]["state"] == "WAITING"
    slurm.stop(full)
    detail = slurm.wait(timed, timeout=60)
    assert detail["jobStatus"]["state"] == "STOPPED", detail
    assert "max run time" in (detail["jobStatus"]["appExitDiagnostics"] or ""), detail
    assert slurm.log(timed, name="stdout") == "ran\n"


def test_a_failed_attempt_is_retried_as_a_new_slurm_job(slurm: Api, tmp_path: Path) -> None:
    flag = tmp_path / "tried"
    tmp_path.chmod(0o777)
    command = f'echo "job $SLURM_JOB_ID"; [ -e {flag} ] || {{ touch {flag}; exit 2; }}'
    name = slurm.submit_ok(job("retried", {"main": role(command)}, jobRetryCount=1))
    detail = slurm.wait(name, timeout=90)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    assert detail["jobStatus"]["retries"] == 1
    first, second = (slurm.log(name, name="stdout", attempt=a).split() for a in (0, 1))
    assert first[0] == second[0] == "job" and first[1] != second[1], (first, second)  # each its own Slurm job


def _conf_dir(conf: str) -> Path:
    return Path(conf).parent.parent


def test_a_slurmctld_restart_loses_nothing(slurm: Api, slurm_cluster: str) -> None:
    name = slurm.submit_ok(job("through", {"main": role("sleep 6; echo done", instances=2)}))
    slurm.wait(name, states={"RUNNING"}, timeout=60)
    d = _conf_dir(slurm_cluster)
    pid = int((d / "run" / "slurmctld.fg.pid").read_text())
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 30, "slurmctld to end")
    assert subprocess.run(["squeue"], capture_output=True).returncode != 0  # the controller is away
    # started again from its saved state (no -i: the jobs come back), as cluster.sh starts it
    ctl = subprocess.Popen(
        ["setsid", "/usr/sbin/slurmctld", "-D"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "SLURM_CONF": slurm_cluster},
    )
    (d / "run" / "slurmctld.fg.pid").write_text(f"{ctl.pid}\n")  # cluster.sh stop ends this one
    detail = slurm.wait(name, timeout=90)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    assert slurm.log(name, name="stdout") == "done\n" and slurm.log(name, index=1, name="stdout") == "done\n"


def test_a_node_going_down_fails_the_job_with_slurms_reason(slurm: Api, slurm_cluster: str) -> None:
    name = slurm.submit_ok(job("downed", {"main": role("echo up; sleep 300", instances=4)}))  # both nodes
    slurm.wait(name, states={"RUNNING"}, timeout=60)
    wait_for(lambda: all(t["taskState"] == "RUNNING" for t in slurm.tasks(slurm.detail(name))), 30)
    try:
        subprocess.run(
            ["scontrol", "update", "nodename=n2", "state=down", "reason=pai-test-disk-died"], check=True, timeout=30
        )
        detail = slurm.wait(name, timeout=90)
    finally:
        subprocess.run(["scontrol", "update", "nodename=n2", "state=resume"], timeout=30)
        subprocess.run(["bash", str(SCRIPT), "env", str(_conf_dir(slurm_cluster))], capture_output=True)
    assert detail["jobStatus"]["state"] == "FAILED", detail
    said = " ".join(str(t["containerExitDiagnostics"]) for t in slurm.tasks(detail))
    assert "node" in said.lower(), slurm.tasks(detail)


def test_a_failed_task_is_retried_alone_while_its_sibling_runs_on(slurm: Api, tmp_path: Path) -> None:
    flag = tmp_path / "tried"
    tmp_path.chmod(0o777)
    flaky = f'if [ "$PAI_TASK_INDEX" = 1 ] && [ ! -e {flag} ]; then touch {flag}; exit 3; fi; sleep 4; echo fine'
    roles = {"main": role(flaky, instances=2, taskRetryCount=1)}
    name = slurm.submit_ok(job("flaky", roles, extras={"gangAllocation": False}))  # (a gang job retries whole)
    detail = slurm.wait(name, timeout=90)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    first, second = slurm.tasks(detail)
    assert (first["retries"], second["retries"]) == (0, 1), (first, second)
    assert slurm.log(name, name="stdout") == "fine\n"  # the sibling ran through the retry undisturbed
    assert slurm.log(name, index=1, task_attempt=1, name="stdout") == "fine\n"
