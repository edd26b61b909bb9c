"""``PUT /api/v2/local/jobs/{user}~{name}/priority`` ``{"jobPriority": "prod", "position": 0}``: an admin changes
a job's priority class and, while it waits, its place among the waiting jobs of that class (core/priority.py).
``GET /api/v2/local/queue?limit=N``: the waiting lines as the caller may see them (an admin all, a user their own
jobs), each job with its place, class and why it waits; ``canReorder`` says whether the caller may change them."""

from __future__ import annotations

from typing import Any

from ..core.errors import BadRequest, ConflictJobError, ForbiddenUserError
from ..core.priority import check_priority, reprioritise, waiting_lines
from .base import MAX_INT, Base, Route


class Priority(Base):
    def put(self, user: str, name: str) -> None:
        if not self.is_admin:
            raise ForbiddenUserError("only an admin may change a job's priority or place in the queue")
        row = self.own_job(user, name)
        body = self.json_body()
        current = row["priority"]
        priority = check_priority(body["jobPriority"]) if "jobPriority" in body else current
        position = body.get("position")
        if position is not None and (not isinstance(position, int) or isinstance(position, bool) or position < 0):
            raise BadRequest(f"position must be an integer from 0, got {position!r}")
        result = reprioritise(self.cluster, row, priority, min(position, MAX_INT) if position is not None else None)
        self.write_json({"message": f"job {row['user']}~{row['name']} reprioritised", **result})


class Preempt(Base):
    """``POST .../preempt`` ``{"reason": "..."}``: an admin preempts a running job by hand (the way the scheduler
    does: its tasks get the job's signal and grace, and it waits again as its next attempt)."""

    def post(self, user: str, name: str) -> None:
        if not self.is_admin:
            raise ForbiddenUserError("only an admin may preempt a job")
        row = self.own_job(user, name)
        reason = self.json_body().get("reason") or "preempted by an admin"
        if not isinstance(reason, str) or len(reason) > 200:
            raise BadRequest("reason must be a string of at most 200 characters")
        if not self.cluster.preempt(row, f"{reason} ({self.user['name']})"):
            raise ConflictJobError(
                f"job {row['user']}~{row['name']} is {row['state']}; only a running job is preempted"
            )
        self.write_json({"message": f"job {row['user']}~{row['name']} is being preempted"})


class WaitingQueue(Base):
    def get(self) -> None:
        limit = self.int_arg("limit", 500, 1, 10_000)
        lines = waiting_lines(self.cluster, self.user["name"], self.is_admin, limit)
        self.write_json({"virtualClusters": lines, "canReorder": self.is_admin, "limit": limit})


def routes(job: str, args: dict[str, Any]) -> list[Route]:
    return [
        (job + r"/priority", Priority, args),
        (job + r"/preempt", Preempt, args),
        (r"/api/v2/local/queue", WaitingQueue, args),
    ]
