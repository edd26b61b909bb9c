"""What the spawn page says while a user's server waits and starts (pai_jupyter/hub/progress.py), from the
cluster's answers: its place in the queue, why it waits, when it starts at the latest."""

from __future__ import annotations

import calendar
import time

from pai_jupyter.client.models import QueuedJob, WaitingQueue
from pai_jupyter.hub import progress

NOW = calendar.timegm((2026, 5, 1, 12, 0, 0))
JOB = "alice~jupyterhub-server-abc123"


def queue(*entries: QueuedJob) -> WaitingQueue:
    return WaitingQueue.model_validate({"virtualClusters": {"default": list(entries)}, "canReorder": False})


def queued(**fields: object) -> QueuedJob:
    user, _, name = str(fields["job"]).partition("~")
    return QueuedJob.model_validate({"username": user, "name": name, **fields})


def test_the_head_of_the_line_says_why_it_waits_and_when_it_starts_at_the_latest() -> None:
    entry = queued(job=JOB, ahead=0, waitingReason="needs 1 CPU, 0 free", startEstimate=(NOW + 185) * 1000)
    event = progress.waiting(JOB, progress.find_queued(queue(entry), JOB), None, now=NOW)
    assert event.progress == progress.WAITING
    assert event.message == (
        "Waiting in the queue: first in line; why: needs 1 CPU, 0 free; starts by 12:03:05 UTC at the latest (in 3m05s)"
    )
    late = progress.waiting(JOB, entry, None, now=NOW + 200)
    assert late.message.endswith("starts by 12:03:05 UTC at the latest (any moment now)")


def test_a_job_behind_others_says_how_many_and_that_nothing_bounds_its_start() -> None:
    other = queued(job="bob~x", ahead=0, waitingReason="needs 4 CPU, 0 free", startEstimate=None)
    mine = queued(job=JOB, ahead=2, waitingReason="2 jobs ahead in virtual cluster 'default'; behind bob~x")
    found = progress.find_queued(queue(other, mine), JOB)
    assert found == mine
    message = progress.waiting(JOB, found, None, now=NOW).message
    assert message.startswith("Waiting in the queue: 2 jobs ahead; why: 2 jobs ahead in virtual cluster 'default'")
    assert message.endswith("no start estimate yet: what it waits for has no max run time")
    assert "1 job ahead;" in progress.waiting(JOB, mine.model_copy(update={"ahead": 1}), None, now=NOW).message


def test_a_job_the_clusters_queue_does_not_hold_says_the_clusters_reason() -> None:
    assert progress.find_queued(queue(), JOB) is None
    assert progress.waiting(JOB, None, "Resources (squeue)", now=NOW).message == (
        "Waiting for resources: Resources (squeue)"
    )
    assert progress.waiting(JOB, None, None, now=NOW).message.endswith("the cluster has not said why yet")


def test_the_steps_rise_until_the_server_answers() -> None:
    steps = [
        progress.submitted(JOB, "default"),
        progress.waiting(JOB, None, "x", now=time.time()),
        progress.running("10.203.0.11"),
        progress.answering("10.203.0.11:41234"),
    ]
    assert [s.progress for s in steps] == sorted({s.progress for s in steps})
    assert steps[2].to_dict() == {"progress": 60, "message": "The job runs on 10.203.0.11: starting Jupyter"}


def test_a_job_slurm_holds_says_its_place_in_slurms_line_and_slurms_expected_start() -> None:
    entry = queued(
        job=JOB,
        ahead=0,
        waitingReason="pending in Slurm as job 12 (Resources)",
        startEstimate=(NOW + 1800) * 1000,
        heldBy="slurm",
    )
    message = progress.waiting(JOB, progress.find_queued(queue(entry), JOB), None, now=NOW).message
    assert message == (
        "Waiting in Slurm's queue: first in line; why: pending in Slurm as job 12 (Resources); "
        "Slurm expects it to start at 12:30:00 UTC (in 30m00s)"
    )
    unbounded = progress.waiting(
        JOB, entry.model_copy(update={"start_estimate": None, "ahead": 3}), None, now=NOW
    ).message
    assert unbounded.startswith("Waiting in Slurm's queue: 3 jobs ahead;")
    assert unbounded.endswith("no start estimate from Slurm yet")
