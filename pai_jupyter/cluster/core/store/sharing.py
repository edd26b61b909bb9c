"""What sharing the cluster reads (core/shares.py): the jobs that hold resources, each whole (a gang job is
preempted whole), and how often each was preempted lately. (Each user's usage comes from usage.py's
``task_intervals``.)"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypedDict

from ....common.states import ACTIVE_TASK
from .schema import sql_set

if TYPE_CHECKING:
    from .jobs import Store


class HoldingJob(TypedDict):
    id: int
    user: str
    vc: str
    priority: str | None
    started: int  # ms: its first active task's launch
    cpu: int
    memory_mb: int
    gpu: int
    leaving: bool  # being stopped, preempted or torn down: what it holds is on its way back


def holding_jobs(store: Store) -> list[HoldingJob]:
    """Every job with an active task, with what all its active tasks hold."""
    rows = store.all(
        "SELECT j.id, j.user, j.vc, j.priority, MIN(COALESCE(t.launched_time, j.submission_time)) AS started, "
        "SUM(t.cpu) AS cpu, SUM(t.memory_mb) AS memory_mb, SUM(t.gpu) AS gpu, "
        "MAX(t.stopping OR t.attempt != j.attempt OR j.sub_state = 'AttemptDeletionPending' "
        "OR j.state = 'STOPPING' OR j.execution_type != 'START') AS leaving "
        "FROM tasks t JOIN jobs j ON j.id = t.job_id "
        f"WHERE t.state IN {sql_set(ACTIVE_TASK)} GROUP BY j.id"
    )
    for r in rows:
        r["leaving"] = bool(r["leaving"])
    return rows  # type: ignore[return-value]


def preempted_since(store: Store, job_ids: list[int], since_ms: int) -> dict[int, int]:
    """How many times each of these jobs was preempted since ``since_ms`` (its ``JobPreempted`` events)."""
    if not job_ids:
        return {}
    rows = store.all(
        "SELECT job_id, COUNT(*) AS n FROM events WHERE job_id IN (SELECT value FROM json_each(?)) "
        "AND reason = 'JobPreempted' AND time >= ? GROUP BY job_id",
        (json.dumps(job_ids), since_ms),
    )
    return {r["job_id"]: r["n"] for r in rows}
