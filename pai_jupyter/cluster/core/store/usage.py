"""What each user used of the cluster in a window, per virtual cluster: the figures fair share orders users by,
shown to the people it orders (``GET /api/v2/local/usage``, ``pai usage``, the Lab's capacity view).

Everything comes from the task rows' own times: a task run holds its ``cpu``, ``memory_mb`` and ``gpu`` from its
``launched_time`` to its ``completed_time`` (still running: to now); each run's share inside the window counts.
A task retried in place keeps one row, so only its last run is known: the figures never count what is not recorded.
GPU *use* (as opposed to allocation) is known only where the cluster keeps GPU samples per task; it keeps none
today, so ``gpu_hours_used`` is None (never invented) unless the caller passes what was measured (``used``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ....common.states import ACTIVE_TASK
from .db import now_ms as clock
from .schema import sql_set

if TYPE_CHECKING:
    from .jobs import Store

HOUR_MS = 3_600_000.0


@dataclass(frozen=True)
class Interval:
    """One task run: who ran it where, when (``end_ms`` None: still running) and what it held."""

    user: str
    vc: str
    start_ms: int
    end_ms: int | None
    cpu: int
    memory_mb: int
    gpu: int
    job_id: int


@dataclass
class UsageRow:
    """One user's use of one virtual cluster in the window (``user`` None: a virtual cluster's total)."""

    user: str | None
    vc: str
    gpu_hours_allocated: float = 0.0
    gpu_hours_used: float | None = None  # from GPU samples, where the cluster has them; else unknown
    cpu_hours: float = 0.0
    memory_gb_hours: float = 0.0
    jobs_started: int = 0  # jobs with an attempt that started in the window
    attempts_started: int = 0
    wait_mean_s: float | None = None  # queueing (an attempt's creation) to start, of the attempts started
    wait_max_s: float | None = None
    users: int = 1  # (totals: how many users' rows make it up)
    # Decayed usage that orders users within a priority class (core/fairshare.py): filled in by its caller.
    fair_share_usage: float | None = None
    _wait_sum_s: float = field(default=0.0, repr=False)

    @property
    def gpu_hours_idle(self) -> float | None:
        """Allocated but not used, where use is known."""
        if self.gpu_hours_used is None:
            return None
        return max(self.gpu_hours_allocated - self.gpu_hours_used, 0.0)

    def to_json(self) -> dict[str, object]:
        """The REST answer's row (camelCase, rounded: hours to 4 places, seconds to 1)."""

        def r4(v: float | None) -> float | None:
            return None if v is None else round(v, 4)

        out: dict[str, object] = {"virtualCluster": self.vc}
        if self.user is not None:
            out["username"] = self.user
        else:
            out["users"] = self.users
        out |= {
            "gpuHoursAllocated": r4(self.gpu_hours_allocated),
            "gpuHoursUsed": r4(self.gpu_hours_used),
            "gpuHoursIdle": r4(self.gpu_hours_idle),
            "cpuHours": r4(self.cpu_hours),
            "memoryGBHours": r4(self.memory_gb_hours),
            "jobsStarted": self.jobs_started,
            "attemptsStarted": self.attempts_started,
            "waitMeanSeconds": None if self.wait_mean_s is None else round(self.wait_mean_s, 1),
            "waitMaxSeconds": None if self.wait_max_s is None else round(self.wait_max_s, 1),
            "fairShareUsage": self.fair_share_usage,
        }
        return out


# A run that ended without a recorded end (a final task with no completed_time) is left out: its end is unknown.
_OVERLAPS = (
    "t.launched_time IS NOT NULL AND t.launched_time <= :now "
    f"AND (t.completed_time >= :since OR (t.completed_time IS NULL AND t.state IN {sql_set(ACTIVE_TASK)}))"
)


def task_intervals(store: Store, since_ms: int, now_ms: int | None = None) -> list[Interval]:
    """Every task run (of every attempt) that held resources at some time in [since_ms, now]."""
    rows = store.db.execute(
        "SELECT j.user, j.vc, t.launched_time AS start, t.completed_time AS end, t.cpu, t.memory_mb, t.gpu, t.job_id "
        f"FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE {_OVERLAPS} ORDER BY t.launched_time, t.job_id",
        {"since": since_ms, "now": clock() if now_ms is None else now_ms},
    )
    return [
        Interval(r["user"], r["vc"], r["start"], r["end"], r["cpu"], r["memory_mb"], r["gpu"], r["job_id"])
        for r in rows
    ]


def usage(
    store: Store,
    since_ms: int,
    now_ms: int,
    users: Iterable[str] | None = None,
    used: Mapping[tuple[str, str], float] | None = None,
) -> list[UsageRow]:
    """Each (user, virtual cluster) that ran or started something in [since_ms, now_ms], sorted; ``users``: only
    theirs; ``used``: GPU-hours measured per (user, vc), where the cluster samples GPUs (else use is unknown).

    Two aggregate statements over the tasks and attempts that touch the window (no row per task reaches Python)."""
    who = sorted(set(users)) if users is not None else None
    only = " AND j.user IN (SELECT value FROM json_each(:users))" if who is not None else ""
    args: dict[str, object] = {"since": since_ms, "now": now_ms}
    if who is not None:
        args["users"] = json.dumps(who)
    # the part of each run inside the window, in ms (a running one: to now)
    held = "(MIN(COALESCE(t.completed_time, :now), :now) - MAX(t.launched_time, :since))"
    rows: dict[tuple[str, str], UsageRow] = {}
    for r in store.db.execute(
        f"SELECT j.user, j.vc, SUM(t.gpu * MAX({held}, 0)) AS gpu_ms, SUM(t.cpu * MAX({held}, 0)) AS cpu_ms, "
        f"SUM(t.memory_mb * MAX({held}, 0)) AS mem_mb_ms FROM tasks t JOIN jobs j ON j.id = t.job_id "
        f"WHERE {_OVERLAPS}{only} GROUP BY j.user, j.vc",
        args,
    ):
        rows[(r["user"], r["vc"])] = UsageRow(
            r["user"],
            r["vc"],
            gpu_hours_allocated=(r["gpu_ms"] or 0) / HOUR_MS,
            cpu_hours=(r["cpu_ms"] or 0) / HOUR_MS,
            memory_gb_hours=(r["mem_mb_ms"] or 0) / 1024 / HOUR_MS,
        )
    # waits: each attempt that started in the window, from its queueing (attempt 0: its submission) to its start
    wait = "MAX(a.launched_time - COALESCE(a.created_time, j.submission_time), 0) / 1000.0"
    for r in store.db.execute(
        f"SELECT j.user, j.vc, COUNT(DISTINCT a.job_id) AS jobs, COUNT(*) AS attempts, SUM({wait}) AS wait_sum, "
        f"MAX({wait}) AS wait_max FROM attempts a JOIN jobs j ON j.id = a.job_id "
        f"WHERE a.launched_time >= :since AND a.launched_time <= :now{only} GROUP BY j.user, j.vc",
        args,
    ):
        row = rows.setdefault((r["user"], r["vc"]), UsageRow(r["user"], r["vc"]))
        row.jobs_started, row.attempts_started = r["jobs"], r["attempts"]
        row._wait_sum_s, row.wait_max_s = float(r["wait_sum"]), float(r["wait_max"])
        row.wait_mean_s = row._wait_sum_s / r["attempts"]
    for key, hours in (used or {}).items():
        if key in rows:
            rows[key].gpu_hours_used = hours
    return [rows[k] for k in sorted(rows)]


def vc_totals(rows: list[UsageRow]) -> list[UsageRow]:
    """Each virtual cluster's total of ``rows`` (no user's name in it); GPU use only where every row knows it."""
    out: dict[str, UsageRow] = {}
    for r in rows:
        t = out.get(r.vc)
        if t is None:
            t = out[r.vc] = UsageRow(None, r.vc, users=0, gpu_hours_used=0.0)
        t.users += 1
        t.gpu_hours_allocated += r.gpu_hours_allocated
        if t.gpu_hours_used is not None and r.gpu_hours_used is not None:
            t.gpu_hours_used += r.gpu_hours_used
        else:
            t.gpu_hours_used = None
        t.cpu_hours += r.cpu_hours
        t.memory_gb_hours += r.memory_gb_hours
        t.jobs_started += r.jobs_started
        t.attempts_started += r.attempts_started
        t._wait_sum_s += r._wait_sum_s
        if r.wait_max_s is not None:
            t.wait_max_s = max(t.wait_max_s or 0.0, r.wait_max_s)
    for t in out.values():
        t.wait_mean_s = t._wait_sum_s / t.attempts_started if t.attempts_started else None
    return [out[k] for k in sorted(out)]
