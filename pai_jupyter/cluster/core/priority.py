"""A job's priority class and place in its queue: read from ``extras.hivedScheduler.jobPriorityClass`` at submit
(OpenPAI/HiveD's crit, prod, test, oppo), changed by an admin (``PUT /api/v2/local/jobs/{user}~{name}/priority``,
``pai job priority``). Stored in the job_priority table (store/schema.py), mirrored in the queue's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol import Job
from .errors import BadRequest, ConflictJobError
from .queue import PRIORITY_CLASSES
from .store import JobCore

if TYPE_CHECKING:
    from .service import Cluster

STEP = 1.0  # queue keys are submission times (ms); a job moved to an end is one step beyond it


def job_priority(job: Job) -> str | None:
    """The priority class the job asks for (None: OpenPAI's "default")."""
    hived = job.extras.get("hivedScheduler")
    value = hived.get("jobPriorityClass") if isinstance(hived, dict) else None
    return value if value in PRIORITY_CLASSES else None


def check_priority(value: Any) -> str | None:
    if value == "default":
        return None
    if not isinstance(value, str) or value not in PRIORITY_CLASSES:  # ({} or [] would not even hash)
        raise BadRequest(f"jobPriority must be one of default, {', '.join(PRIORITY_CLASSES)}; got {value!r}")
    return str(value)


def reprioritise(cluster: Cluster, row: JobCore, priority: str | None, position: int | None) -> dict[str, Any]:
    """Give a job a priority class and, while it waits, a place among the waiting jobs of that class in its
    virtual cluster (0: first). Returns its class and how many jobs are now ahead of it."""
    queue = cluster.queue
    if position is not None and queue.position(row["vc"], row["submission_time"], row["id"]) is None:
        raise ConflictJobError(f"job {row['user']}~{row['name']} is not waiting; only a waiting job has a place")
    key = None
    if position is not None:
        queue.set_order(row["id"], priority, None, row["submission_time"])  # first its class's line
        rank = queue.where[row["id"]][1][0]
        same = [e for e in queue.by_vc[row["vc"]] if e[0] == rank and e[2] != row["id"]]
        position = max(0, min(position, len(same)))
        if not same:
            key = None
        elif position == 0:
            key = same[0][1] - STEP
        elif position == len(same):
            key = same[-1][1] + STEP
        else:
            key = (same[position - 1][1] + same[position][1]) / 2
    with cluster.store.tx():
        cluster.store.set_priority(row["id"], priority, key)
    queue.set_order(row["id"], priority, key, row["submission_time"])
    cluster.schedule()
    return {
        "jobPriority": priority or "default",
        "ahead": queue.position(row["vc"], row["submission_time"], row["id"]),
    }
