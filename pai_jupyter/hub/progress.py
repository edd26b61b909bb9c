"""What the spawn page's progress bar says while a server's job waits and starts (PAISpawner.progress): its place
in the queue, why it waits, and when it will start at the latest (the embedded cluster's reservation for the head
of a line, docs/queue.md; a batch system's own estimate where the cluster reports one), then the server itself.

Pure functions of the cluster's answers (the job's detail, its entry in ``GET /api/v2/local/queue``), so each
message is tested without a Hub. JupyterHub shows ``message`` as text (never as HTML).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..client.models import QueuedJob, WaitingQueue
from ..common.format import duration

# the bar: submitted, waiting, running (the server starting), answering; the Hub adds 100 once it is ready
SUBMITTED, WAITING, RUNNING, ANSWERING = 10, 20, 60, 90


@dataclass(frozen=True)
class Event:
    progress: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"progress": self.progress, "message": self.message}


def submitted(job: str, vc: str) -> Event:
    return Event(SUBMITTED, f"Job {job} submitted to virtual cluster {vc!r}")


SCHEDULERS = {"slurm": "Slurm"}  # a queue entry's ``heldBy``: the batch system whose scheduler holds the job


def _when(estimate_ms: int | float | None, now: float, held_by: str | None = None) -> str:
    """The start estimate: the embedded cluster's reservation bounds the start (docs/queue.md); a batch system's
    own estimate (Slurm's backfill plan, ``squeue --start``) is its expectation, which later jobs of higher
    priority may push back."""
    scheduler = SCHEDULERS.get(held_by or "", held_by)
    if estimate_ms is None:
        if scheduler:
            return f"no start estimate from {scheduler} yet"
        return "no start estimate yet: what it waits for has no max run time"
    left = estimate_ms / 1000 - now
    at = time.strftime("%H:%M:%S UTC", time.gmtime(estimate_ms / 1000))
    soon = f" (in {duration(left)})" if left > 0 else " (any moment now)"
    if scheduler:
        return f"{scheduler} expects it to start at {at}{soon}"
    return f"starts by {at} at the latest{soon}"


def waiting(job: str, queued: QueuedJob | None, reason: str | None, now: float | None = None) -> Event:
    """The job waits: ``queued`` is its entry in the cluster's queue (``ahead``, ``waitingReason``,
    ``startEstimate``; ``heldBy``: the batch system whose scheduler holds it, whose line and estimate those are),
    None where the cluster has none for it (not handed to its scheduler yet);
    ``reason``: the detail's ``waitingReason``."""
    now = time.time() if now is None else now
    if queued is None:
        return Event(WAITING, f"Waiting for resources: {reason or 'the cluster has not said why yet'}")
    ahead = queued.ahead
    place = "first in line" if ahead == 0 else f"{ahead} job{'s' * (ahead != 1)} ahead"
    why = queued.waiting_reason or reason
    held_by = queued.held_by
    line = f"{SCHEDULERS.get(held_by, held_by)}'s queue" if held_by else "the queue"
    parts = [f"Waiting in {line}: {place}"]
    if why:
        parts.append(f"why: {why}")
    parts.append(_when(queued.start_estimate, now, held_by))
    return Event(WAITING, "; ".join(parts))


def running(where: str) -> Event:
    return Event(RUNNING, f"The job runs on {where}: starting Jupyter")


def answering(url: str) -> Event:
    return Event(ANSWERING, f"Jupyter answers at {url}")


def find_queued(queue: WaitingQueue, job: str) -> QueuedJob | None:
    """The job's entry in the cluster's waiting queue, if it is queued there."""
    return queue.find(job)
