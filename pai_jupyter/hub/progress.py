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


def _when(estimate_ms: int | float | None, now: float) -> str:
    if estimate_ms is None:
        return "no start estimate yet: what it waits for has no max run time"
    left = estimate_ms / 1000 - now
    at = time.strftime("%H:%M:%S UTC", time.gmtime(estimate_ms / 1000))
    return f"starts by {at} at the latest" + (f" (in {duration(left)})" if left > 0 else " (any moment now)")


def waiting(job: str, queued: dict[str, Any] | None, reason: str | None, now: float | None = None) -> Event:
    """The job waits: ``queued`` is its entry in the cluster's queue (``ahead``, ``waitingReason``,
    ``startEstimate``), None where the cluster has none for it (a batch system that queues it itself);
    ``reason``: the detail's ``waitingReason``."""
    now = time.time() if now is None else now
    if queued is None:
        return Event(WAITING, f"Waiting for resources: {reason or 'the cluster has not said why yet'}")
    ahead = queued.get("ahead")
    place = (
        "first in line"
        if ahead == 0
        else (f"{ahead} job{'s' * (ahead != 1)} ahead" if isinstance(ahead, int) else "in line")
    )
    why: str | None = queued.get("waitingReason") or reason
    parts = [f"Waiting in the queue: {place}"]
    if why:
        parts.append(f"why: {why}")
    parts.append(_when(queued.get("startEstimate"), now))
    return Event(WAITING, "; ".join(parts))


def running(where: str) -> Event:
    return Event(RUNNING, f"The job runs on {where}: starting Jupyter")


def answering(url: str) -> Event:
    return Event(ANSWERING, f"Jupyter answers at {url}")


def find_queued(queue: dict[str, Any], job: str) -> dict[str, Any] | None:
    """The job's entry in ``GET /api/v2/local/queue``'s answer, if it is queued there."""
    for line in (queue.get("virtualClusters") or {}).values():
        for entry in line:
            if isinstance(entry, dict) and entry.get("job") == job:
                return entry
    return None
