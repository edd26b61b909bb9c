"""Preemption on Slurm is Slurm's (docs/slurm.md, "Preemption and fair share on Slurm"): on the two-node test
cluster with accounting (slurmdbd, QOS crit > prod > test > oppo, preempt/qos), a job of class ``oppo`` holding
the GPUs is preempted by Slurm when a ``crit`` job needs them. Its command gets the job's own signal at the start
of the grace (``--signal``), saves its checkpoint and ends; the runtime tells the daemon the task was preempted
(its Slurm job's PreemptTime), whichever way it ended; the daemon queues the job again as a new attempt (a new
``sbatch``), which resumes from ``PAI_CHECKPOINT_DIR`` on the shared job directory."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.runtime.base import TaskExit, TaskHandle
from pai_jupyter.cluster.runtime.slurm import SlurmRuntime
from tests.helpers.daemon import Api, remove_accounts, start_daemon
from tests.helpers.runtime import make_spec
from tests.helpers.slurm_jobs import job, role

from ..polling import wait_for
from ..slurm.fixture import accounting_cluster

pytestmark = [pytest.mark.slurm]


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """This module's cluster has accounting (conftest's ``slurm`` daemon fixture takes it by this name)."""
    yield from accounting_cluster(tmp_path_factory)


@pytest.fixture
def slurm_gpus(slurm_cluster: str, pai_home: Path) -> Iterator[Api]:
    """A daemon on the Slurm runtime that takes the cluster's four GPUs (conftest's ``slurm`` takes none)."""
    api = start_daemon(pai_home, runtime="slurm", cpus=4, memory_mb=8000, gpus=4)
    yield api
    control.stop(pai_home)
    remove_accounts(pai_home)


TRAPS = """trap 'echo "got $PAI_PREEMPT_SIGNAL" > "$out/signalled"; exit 0' {sig}
touch "$out/ready"
while :; do sleep 0.2 & wait $! || true; done
"""


def _start(rt: SlurmRuntime, td: Path, script: str, env: dict[str, str], **over: Any) -> list[TaskHandle]:
    td.mkdir(parents=True, exist_ok=True)
    env = {"PAI_CURRENT_TASK_ROLE_NAME": "main", "PAI_TASK_INDEX": "0", **env}
    return rt.start_job([make_spec(td, script, env=env, **over)])


def _gather(rt: SlurmRuntime, waits: list[tuple[TaskHandle, Path]], timeout: float) -> list[TaskExit]:
    async def go() -> list[TaskExit]:
        return list(await asyncio.wait_for(asyncio.gather(*(rt.wait(h, td) for h, td in waits)), timeout))

    return asyncio.run(go())


def test_the_runtime_submits_classes_as_qos_and_reports_slurms_preemption(slurm_cluster: str, tmp_path: Path) -> None:
    """Without the daemon: two oppo tasks fill both nodes' GPUs; a crit task needs two GPUs; Slurm preempts one
    oppo task: its command gets USR1 (the job's signal), writes its file and exits 0; the runtime's wait says
    preempted all the same (what the daemon needs to queue a new attempt), and the crit task runs."""
    rt = SlurmRuntime()
    assert rt.accounting.qos == {"crit", "prod", "test", "oppo"} and rt.accounting.preempts
    env = {"PAI_PREEMPT_SIGNAL": "USR1", "PAI_PREEMPT_GRACE_SECONDS": "20"}
    oppo = []
    for i in range(2):
        out = tmp_path / f"oppo{i}"
        script = f"out={out}\n" + TRAPS.format(sig="USR1")
        [h] = _start(rt, out / "t", script, priority="oppo", gpu_count=2, gpus=[], cpu=1, env=env)
        assert h.info["qos"] == "oppo"
        oppo.append((h, out))
    wait_for(lambda: all((out / "ready").exists() for _, out in oppo), 60, "both oppo tasks to run")
    line = subprocess.run(["squeue", "-h", "-j", oppo[0][0].id, "-o", "%q"], capture_output=True, text=True)
    assert line.stdout.strip() == "oppo"
    crit_dir = tmp_path / "crit"
    [crit] = _start(rt, crit_dir / "t", "echo crit ran", priority="crit", gpu_count=2, gpus=[], env=env)
    [done] = _gather(rt, [(crit, crit_dir / "t")], 90)
    assert done.exit_code == 0 and done.preempted is None, done
    # which oppo task Slurm picks is its own choice; the other one runs on
    picked = [(h, out) for h, out in oppo if (out / "signalled").exists()]
    assert len(picked) == 1, picked
    [(victim, vdir)] = picked
    assert (vdir / "signalled").read_text() == "got USR1\n"
    [result] = _gather(rt, [(victim, vdir / "t")], 60)
    assert result.exit_code == 0, result  # it saved its work and ended well, within the grace
    assert result.preempted and result.preempted.startswith("preempted by Slurm"), result
    assert "oppo" in result.preempted, result
    for h, _ in oppo:
        rt.stop(h)


def test_a_task_that_ignores_its_signal_is_ended_by_slurm_and_still_reported_preempted(
    slurm_cluster: str, tmp_path: Path
) -> None:
    """A task that keeps running past its grace is ended by Slurm (PREEMPTED: the daemon's jobs are --no-requeue,
    so Slurm cancels them under PreemptMode=REQUEUE instead of requeueing them); a two-task job gets the default
    TERM in every step."""
    rt = SlurmRuntime()
    out = tmp_path / "stubborn"
    env = {"PAI_PREEMPT_SIGNAL": "TERM", "PAI_PREEMPT_GRACE_SECONDS": "5", "PAI_JOB_TASK_COUNT": "2"}
    script = f'out={out}\ntrap \'echo "$PAI_TASK_INDEX" >> "$out/termed"\' TERM\ntouch "$out/ready.$PAI_TASK_INDEX"\n'
    script += "while :; do sleep 0.2 & wait $! || true; done\n"
    specs = []
    for i in range(2):
        td = out / f"t{i}"
        td.mkdir(parents=True)
        task_env = {**env, "PAI_CURRENT_TASK_ROLE_NAME": "main", "PAI_TASK_INDEX": str(i)}
        specs.append(make_spec(td, script, index=i, priority="oppo", gpu_count=2, env=task_env))
    handles = rt.start_job(specs)
    wait_for(lambda: all((out / f"ready.{i}").exists() for i in range(2)), 60, "both tasks to run")
    crit_dir = tmp_path / "crit"
    [crit] = _start(rt, crit_dir / "t", "echo crit ran", priority="crit", gpu_count=2, env={})
    ends = _gather(rt, [(h, s.task_dir) for h, s in zip(handles, specs, strict=True)], 120)
    assert set((out / "termed").read_text().split()) == {"0", "1"}  # every step's task got TERM (more than once)
    assert all(e.preempted and "preempted by Slurm" in e.preempted for e in ends), ends
    [done] = _gather(rt, [(crit, crit_dir / "t")], 60)
    assert done.exit_code == 0


def test_a_user_without_an_association_gets_one_under_the_pai_account(slurm_cluster: str) -> None:
    rt = SlurmRuntime()
    rt.accounting.associate(65534, {**os.environ})  # nobody: no association yet
    line = ["sacctmgr", "-n", "-P", "show", "assoc", "where", "user=nobody", "format=account,qos,defaultqos"]
    account, qos, default = subprocess.run(line, capture_output=True, text=True).stdout.split("|")
    assert account == "pai" and set(qos.split(",")) >= {"crit", "prod", "test", "oppo"}, qos
    assert default.strip() == "test"


RESUMES = """c=$PAI_CHECKPOINT_DIR n=0
[ -f "$c/step" ] && n=$(cat "$c/step")
echo "start $n" >> "$c/starts"
trap 'echo "$n" > "$c/step"; echo "signalled $PAI_PREEMPT_SIGNAL $n" >> "$c/starts"; exit 0' USR1
touch "$c/ready"
while [ "$n" -lt 300 ]; do n=$((n + 1)); sleep 0.1 & wait $! || true; done
echo "done $n" >> "$c/starts"
"""


def test_the_daemon_requeues_a_job_slurm_preempted_and_it_resumes_from_its_checkpoint(slurm_gpus: Api) -> None:
    """Depends on the core (ending.py): a TaskExit with ``preempted`` ends the attempt and queues a new one."""
    gpus = {"cpu": 1, "memoryMB": 256, "gpu": 2}
    extras = {"hivedScheduler": {"jobPriorityClass": "oppo"}, "preemption": {"graceSeconds": 20, "signal": "USR1"}}
    names = []
    for i in range(2):  # both nodes' GPUs
        roles = {"main": role(RESUMES, resourcePerInstance=gpus)}
        names.append(slurm_gpus.submit_ok(job(f"oppo{i}", roles, extras=extras)))
    jobs = Path(slurm_gpus.home) / "local" / "jobs"
    ckpt = {n: jobs / n / "output" / "checkpoints" for n in names}
    wait_for(lambda: all((ckpt[n] / "ready").exists() for n in names), 90, "both oppo jobs to run")
    crit_extras = {"hivedScheduler": {"jobPriorityClass": "crit"}}
    crit = slurm_gpus.submit_ok(job("crit", {"main": role("sleep 2", resourcePerInstance=gpus)}, extras=crit_extras))
    assert slurm_gpus.wait(crit, timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    details = {n: slurm_gpus.wait(n, timeout=180) for n in names}
    assert all(d["jobStatus"]["state"] == "SUCCEEDED" for d in details.values()), json.dumps(details)[:2000]
    preempted = [n for n in names if "signalled" in (ckpt[n] / "starts").read_text()]
    assert len(preempted) == 1, {n: (ckpt[n] / "starts").read_text() for n in names}
    starts = (ckpt[preempted[0]] / "starts").read_text().split("\n")
    assert starts[0] == "start 0" and starts[1].startswith("signalled USR1 "), starts
    saved = int(starts[1].split()[-1])
    assert saved > 0 and starts[2] == f"start {saved}" and starts[3] == "done 300", starts  # resumed, not redone
    assert details[preempted[0]]["jobStatus"]["retries"] == 0  # a preemption is no retry
    events = slurm_gpus.http.get(f"/api/v2/jobs/{preempted[0]}/events").json()
    assert "preempted by Slurm" in json.dumps(events), events


SLURM_CYCLES = 8  # each preempts both trainers: 16 preemptions by Slurm


def test_slurm_preempts_two_toy_trainers_again_and_again_and_no_checkpoint_is_torn(slurm_gpus: Api) -> None:
    """Two oppo toy trainers (tests/toytrainer/train.sh) hold the four GPUs; a crit job of two 2-GPU tasks is
    submitted again and again, and Slurm preempts both each time (QOS, ``--signal``); each trainer saves on its
    signal and its next attempt resumes. At the end no checkpoint is torn, and each trainer's curve is unbroken."""
    from tests.toytrainer.verify import verify

    trainer = (Path(__file__).resolve().parents[1] / "toytrainer" / "train.sh").read_text()
    gpus = {"cpu": 1, "memoryMB": 256, "gpu": 2}
    extras = {"hivedScheduler": {"jobPriorityClass": "oppo"}, "preemption": {"graceSeconds": 20, "signal": "USR1"}}
    names = []
    for i in range(2):
        command = f"set -- 100000 5 0.05\n{trainer}"
        names.append(
            slurm_gpus.submit_ok(job(f"trainer{i}", {"main": role(command, resourcePerInstance=gpus)}, extras=extras))
        )
    where = {n: Path(slurm_gpus.home) / "local" / "jobs" / n / "output" / "checkpoints" for n in names}

    def trained(n: str, attempt: int) -> bool:
        log = where[n] / "progress" / f"{attempt}.log"
        return log.exists() and sum(1 for line in log.read_text().splitlines() if line[:1].isdigit()) >= 3

    crit_extras = {"hivedScheduler": {"jobPriorityClass": "crit"}}
    for cycle in range(SLURM_CYCLES):
        wait_for(lambda c=cycle: all(trained(n, c) for n in names), 120, f"both trainers' attempt {cycle}")
        crit = slurm_gpus.submit_ok(
            job(f"crit{cycle}", {"main": role("true", instances=2, resourcePerInstance=gpus)}, extras=crit_extras)
        )
        assert slurm_gpus.wait(crit, timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
        wait_for(
            lambda c=cycle: all(slurm_gpus.detail(n)["jobStatus"]["attemptId"] == c + 1 for n in names),
            120,
            f"both trainers' attempt {cycle + 1}",
        )
    wait_for(lambda: all(trained(n, SLURM_CYCLES) for n in names), 120, "the trainers' last attempts")
    for n in names:
        slurm_gpus.stop(n)
        slurm_gpus.wait(n, timeout=120)
        report = verify(where[n])
        assert report.corrupt == [] and report.continuous and len(report.attempts) == SLURM_CYCLES + 1, report
        assert report.lost[1:] == [0] * SLURM_CYCLES, report  # each saved on its signal: nothing done twice
        assert slurm_gpus.detail(n)["jobStatus"]["retries"] == 0
