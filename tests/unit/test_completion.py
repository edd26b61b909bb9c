"""OpenPAI's completion policy, decided from task rows alone."""

from __future__ import annotations

from typing import Any

from pai_jupyter.cluster.core.completion import decide
from pai_jupyter.common.states import FINAL
from pai_jupyter.protocol import Job, TaskRole


def job(**role: Any) -> Job:
    return Job(name="j", image="i", task_roles=[TaskRole(name="w", command="x", **role)])


def tasks(*states: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "w",
            "idx": i,
            "state": s,
            "exit_code": 0 if s == "SUCCEEDED" else 3,
            "exit_diagnostics": None,
            "completed_time": i if s in FINAL else None,
        }
        for i, s in enumerate(states)
    ]


def test_the_first_failure_fails_the_job_by_default() -> None:
    d = decide(job(instances=3), tasks("RUNNING", "FAILED", "RUNNING"))
    assert d is not None and d.state == "FAILED" and d.trigger["idx"] == 1 and d.exit_code == 3


def test_min_failed_counts_failures_and_null_disables_it() -> None:
    assert decide(job(instances=3, min_failed=2), tasks("FAILED", "RUNNING", "RUNNING")) is None
    assert decide(job(instances=3, min_failed=2), tasks("FAILED", "FAILED", "RUNNING")).state == "FAILED"
    d = decide(job(instances=2, min_failed=None), tasks("FAILED", "FAILED"))
    assert d is not None and d.state == "SUCCEEDED" and d.message == "all tasks completed"


def test_min_succeeded_ends_the_attempt_early_else_all_must_end() -> None:
    d = decide(job(instances=3, min_succeeded=1), tasks("RUNNING", "SUCCEEDED", "RUNNING"))
    assert d is not None and d.state == "SUCCEEDED" and d.trigger["idx"] == 1
    assert decide(job(instances=3), tasks("SUCCEEDED", "SUCCEEDED", "RUNNING")) is None
    assert decide(job(instances=3), tasks("SUCCEEDED", "SUCCEEDED", "SUCCEEDED")).state == "SUCCEEDED"


def test_waiting_tasks_keep_the_attempt_open() -> None:
    assert decide(job(instances=2), tasks("SUCCEEDED", "WAITING")) is None


def test_roles_are_decided_in_order_and_a_stopped_attempt_with_all_tasks_ended_succeeds() -> None:
    two = Job(
        name="j",
        image="i",
        task_roles=[TaskRole(name="ps", command="x", min_succeeded=1), TaskRole(name="w", command="x", instances=2)],
    )
    ps = {
        "role": "ps",
        "idx": 0,
        "state": "RUNNING",
        "exit_code": None,
        "exit_diagnostics": None,
        "completed_time": None,
    }
    rows = [ps, *tasks("SUCCEEDED", "FAILED")]
    d = decide(two, rows)
    assert d is not None and d.state == "FAILED" and d.trigger["role"] == "w" and "w[1] failed" in d.message
    rows[0].update(state="SUCCEEDED", exit_code=0, completed_time=5)
    d = decide(two, rows)  # the ps role's minSucceeded is met before the workers' failure is looked at
    assert d is not None and d.state == "SUCCEEDED" and d.trigger["role"] == "ps"
    d = decide(job(instances=2, min_failed=None), tasks("STOPPED", "SUCCEEDED"))
    assert d is not None and d.state == "SUCCEEDED" and d.trigger["idx"] == 1  # the last to end


def test_no_tasks_decide_nothing() -> None:
    assert decide(job(instances=1), []) is None
