"""A job's priority class and place in its queue: read from ``extras.hivedScheduler.jobPriorityClass`` at submit
(OpenPAI/HiveD's crit, prod, test, oppo), changed by an admin (``PUT /api/v2/local/jobs/{user}~{name}/priority``,
``pai job priority``). Stored in the job's row, its place in job_priority (store/schema.py), mirrored in the
queue's order.
``Queued`` is what these steps use of the cluster (``Cluster``, service.py)."""

from __future__ import annotations

from typing import Any, Protocol, cast

from ...common.states import ACTIVE_TASK
from ...protocol import Job
from ..runtime.base import TaskHandle
from .errors import BadRequest, ConflictJobError
from .queue import PRIORITY_CLASSES
from .state import ClusterState
from .store import JobCore, loads


class Queued(Protocol):
    """What a change of priority and the list of waiting jobs use of the cluster."""

    @property
    def state(self) -> ClusterState: ...

    def schedule(self) -> None: ...

    def waiting_reason(self, row: JobCore) -> str | None: ...


TIE_SPAN = 1.0  # queue keys are submission times (ms): a line whose jobs share one is spread within that ms
TIE_STEP_MIN = 1e-3  # (well above a float's resolution at today's epoch milliseconds, ~2.4e-4)


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


def reprioritise(cluster: Queued, row: JobCore, priority: str | None, position: int | None) -> dict[str, Any]:
    """Give a job a priority class and, while it waits, a place among the waiting jobs of that class in its
    virtual cluster (0: first). Returns its class and how many jobs are now ahead of it."""
    queue, store = cluster.state.queue, cluster.state.store
    if position is not None and queue.position(row["vc"], row["submission_time"], row["id"]) is None:
        raise ConflictJobError(f"job {row['user']}~{row['name']} is not waiting; only a waiting job has a place")
    if position is None:
        with store.tx():
            store.set_priority(row["id"], priority, None)
        queue.set_order(row["id"], priority, None, row["submission_time"])
    else:
        queue.set_order(row["id"], priority, None, row["submission_time"])  # first its class's line
        rank = queue.where[row["id"]][1][0]
        same = [e for e in queue.by_vc[row["vc"]] if e[0] == rank and e[2] != row["id"]]
        line = [e[2] for e in same]
        line.insert(max(0, min(position, len(line))), row["id"])
        first, last = (same[0][1], same[-1][1]) if same else (row["submission_time"], row["submission_time"])
        # the whole line is keyed anew, in its order, within the span it had: two jobs submitted in the same
        # millisecond share a key, and a midpoint between them would not place a job between them
        step = (last - first) / (len(line) - 1) if last > first else max(TIE_SPAN / len(line), TIE_STEP_MIN)
        with store.tx():
            for i, job_id in enumerate(line):
                own = priority if job_id == row["id"] else queue.order.get(job_id, (None, None))[0]
                key = first + i * step
                store.set_priority(job_id, own, key)
                queue.set_order(job_id, own, key, key)
    # a job already handed to a batch system's scheduler is reordered there (launches.py)
    live = [t for t in store.tasks(row["id"], row["attempt"]) if t["handle"] and t["state"] in ACTIVE_TASK]
    cluster.state.launch.reprioritise([TaskHandle.from_dict(loads(t["handle"])) for t in live], priority)
    cluster.schedule()
    return {
        "jobPriority": priority or "default",
        "ahead": queue.position(row["vc"], row["submission_time"], row["id"]),
    }


def _ms(seconds: float | None) -> int | None:
    return int(seconds * 1000) if seconds is not None else None


def waiting_lines(cluster: Queued, user: str, admin: bool, limit: int) -> dict[str, list[dict[str, Any]]]:
    """Each virtual cluster's waiting jobs in queue order, with their place (``ahead``), class and why they wait,
    and for a head the plan reserved a start for, that time (``startEstimate``, epoch ms: the start is no later
    once the running jobs reach their max run time; docs/queue.md): an admin's view has every job (the first
    ``limit`` of each line), a user's only their own."""
    queue, store = cluster.state.queue, cluster.state.store
    out: dict[str, list[dict[str, Any]]] = {}
    for vc in sorted(queue.by_vc):
        line: list[dict[str, Any]] = []
        for ahead, job_id in enumerate(queue.line(vc)):
            if len(line) >= limit:
                break
            row = store.job_core(job_id)
            if row is None or (not admin and row["user"] != user):
                continue
            priority = queue.order.get(job_id, (None, None))[0]
            line.append(
                {
                    "job": f"{row['user']}~{row['name']}",
                    "username": row["user"],
                    "name": row["name"],
                    "ahead": ahead,
                    "jobPriority": priority or "default",
                    "waitingReason": cluster.waiting_reason(row),
                    "submissionTime": row["submission_time"],
                    "startEstimate": _ms(queue.reserved.get(job_id)),
                    "fairShareUsage": round(queue.usage.get(row["user"], 0.0) / 3600, 4),
                }
            )
        if line:
            out[vc] = line
    _held_lines(cluster, user, admin, limit, out)
    return out


def _held_lines(cluster: Queued, user: str, admin: bool, limit: int, out: dict[str, list[dict[str, Any]]]) -> None:
    """The waiting jobs a batch system's scheduler holds (``launches.Handed``: handed to it at once, so not in the
    daemon's queue): their place in that scheduler's line and the start it expects (``Batch.held``), ``heldBy``
    naming it; each line in that scheduler's order. None where the daemon places jobs itself."""
    runtime = cluster.state.runtime
    held: dict[str, list[tuple[int, float, dict[str, Any]]]] = {}
    visible = lambda row: admin or row["user"] == user  # noqa: E731
    for row, where in cluster.state.launch.held_jobs(cluster.state.queue.where, visible):
        entry = {
            "job": f"{row['user']}~{row['name']}",
            "username": row["user"],
            "name": row["name"],
            "ahead": where.ahead,
            "jobPriority": row["priority"] or "default",
            "waitingReason": cluster.waiting_reason(cast("JobCore", row)),
            "submissionTime": row["submission_time"],
            "startEstimate": _ms(where.start_estimate),
            "heldBy": runtime.name,
        }
        held.setdefault(row["vc"], []).append((where.ahead, row["submission_time"], entry))
    for vc, entries in held.items():
        line = out.setdefault(vc, [])
        line += [e for _, _, e in sorted(entries, key=lambda x: (x[0], x[1]))][: max(0, limit - len(line))]
        if not line:
            del out[vc]
