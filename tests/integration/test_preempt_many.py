"""Forced preemptions by the dozen on a real daemon, with the process runtime (the Python toy trainer, through
pai_jupyter.checkpoint) and with Docker (the sh toy trainer in a busybox container): each time the admin preempts
the running job (``POST .../preempt``, the scheduler's own path), its next attempt resumes from its checkpoint. At
the end: no checkpoint torn or inconsistent, every attempt resumed from one an earlier attempt saved, the steps of
all attempts one unbroken curve, and the work lost to each preemption at most a checkpoint interval (none when the
trainer has the grace to save; up to the interval when SIGKILL comes at once). tests/toytrainer/ has the trainers
and the verifier; the Slurm cluster's count is in test_preempt_slurm.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.daemon import Api, v1
from tests.polling import wait_for
from tests.toytrainer.verify import Report, verify

pytestmark = pytest.mark.slow

TRAINERS = Path(__file__).resolve().parents[1] / "toytrainer"
TASK_TOOLS = os.environ.get("PAI_TEST_TASK_TOOLS", "/opt/pai-task-tools")  # .ci/run installs pai_jupyter there
EVERY = 5  # steps between checkpoints
STEP_S = 0.01


def python_trainer(steps: int) -> str:
    source = (TRAINERS / "train.py").read_text()
    return f"exec {TASK_TOOLS}/bin/python3 - {steps} {EVERY} {STEP_S} <<'PAI_TRAINER'\n{source}\nPAI_TRAINER"


def sh_trainer(steps: int) -> str:
    return f"set -- {steps} {EVERY} {STEP_S}\n{(TRAINERS / 'train.sh').read_text()}"


def trainer_job(name: str, command: str, grace: float, image: str = "pai-test/busybox:latest") -> str:
    doc = json.loads(v1(name, command))
    doc["image"] = image
    doc["extras"] = {"preemption": {"graceSeconds": grace}}
    return json.dumps(doc)


def steps_done(where: Path, attempt: int) -> int:
    log = where / "progress" / f"{attempt}.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for line in lines if line[:1].isdigit())


def preempt_repeatedly(api: Api, job: str, where: Path, times: int) -> None:
    """Preempt ``job`` ``times`` times, each once its attempt has done a few steps; then stop it."""
    for attempt in range(times):
        wait_for(lambda a=attempt: steps_done(where, a) >= 3, 60, f"attempt {attempt} of {job} to train")
        r = api.http.post(f"/api/v2/local/jobs/{job}/preempt", json={"reason": f"test {attempt}"})
        assert r.status_code == 200, r.text
        wait_for(
            lambda a=attempt: api.detail(job)["jobStatus"]["attemptId"] == a + 1, 60, f"{job}'s attempt {attempt + 1}"
        )
    wait_for(lambda: steps_done(where, times) >= 3, 60, f"the last attempt of {job} to train")
    api.stop(job)
    api.wait(job, timeout=60)


def check(report: Report, times: int, grace_saves: bool) -> None:
    assert report.corrupt == [] and report.checkpoints >= 1, report
    assert len(report.attempts) == times + 1 and report.continuous, report
    if grace_saves:  # the trainer saved as it was told: nothing was done twice
        assert report.lost[1:] == [0] * times, report
    assert max(report.lost) <= EVERY, report  # SIGKILL at once: at most the steps since the last checkpoint


@pytest.mark.parametrize(("grace", "times"), [(5, 25), (0, 20)], ids=["grace", "sigkill-at-once"])
def test_process_runtime_preemptions_never_corrupt_a_checkpoint(daemon: Api, grace: float, times: int) -> None:
    job = daemon.submit_ok(trainer_job("trainer", python_trainer(100_000), grace))
    where = daemon.home / "local" / "jobs" / job / "output" / "checkpoints"
    preempt_repeatedly(daemon, job, where, times)
    check(verify(where), times, grace_saves=grace > 0)
    detail = daemon.detail(job)["jobStatus"]
    assert detail["retries"] == 0 and detail["attemptId"] == times


@pytest.mark.parametrize(("grace", "times"), [(5, 20), (0, 20)], ids=["grace", "sigkill-at-once"])
def test_docker_preemptions_never_corrupt_a_checkpoint(docker_daemon: Api, grace: float, times: int) -> None:
    job = docker_daemon.submit_ok(trainer_job("trainer", sh_trainer(100_000), grace))
    where = docker_daemon.home / "local" / "jobs" / job / "output" / "checkpoints"
    preempt_repeatedly(docker_daemon, job, where, times)
    check(verify(where), times, grace_saves=grace > 0)
