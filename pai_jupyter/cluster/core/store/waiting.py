"""What the scheduler needs of many waiting jobs, read in two statements: each job's waiting tasks' demands and
the two facts of its model the plan uses (gang allocation, max run time) taken with SQLite's JSON functions, so
the first pass after a restart parses no job model (P18's cold figure in tests/bench/queue.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TypedDict

from ....common.states import LIVE_JOB
from .schema import GANG_ALLOCATION, MAX_RUN_TIME_MINUTES, sql_set

if TYPE_CHECKING:
    from .jobs import Store


class WaitingView(TypedDict):
    id: int
    tasks: list[tuple[int, int, int]]  # cpu, memory_mb, gpu of each waiting task of the current attempt, in order
    gang: bool
    max_run_time_minutes: float | None
    user: str


def waiting_views(store: Store, job_ids: list[int]) -> dict[int, WaitingView]:
    """The views of those of ``job_ids`` that are live START jobs with waiting tasks (others are left out)."""
    if not job_ids:
        return {}
    ids = json.dumps(job_ids)
    # (``+t.state``: found by the tasks' primary key per job, not by scanning every waiting task's state index;
    # a submit reads one job's view while 10,000 wait: P4's fill)
    out: dict[int, WaitingView] = {}
    for row in store.db.execute(
        f"SELECT j.id, j.user, {GANG_ALLOCATION} AS gang, {MAX_RUN_TIME_MINUTES} AS minutes "
        "FROM jobs j JOIN job_configs c ON c.job_id = j.id "
        "WHERE j.id IN (SELECT value FROM json_each(?)) AND j.execution_type = 'START' "
        f"AND j.state IN {sql_set(LIVE_JOB)}",
        (ids,),
    ):
        minutes = row["minutes"]
        out[row["id"]] = {
            "id": row["id"],
            "tasks": [],
            "gang": row["gang"] != "false",  # (the model's rule: only a JSON false turns it off)
            "max_run_time_minutes": float(minutes) if isinstance(minutes, (int, float)) else None,
            "user": row["user"],
        }
    for row in store.db.execute(
        "SELECT t.job_id, t.cpu, t.memory_mb, t.gpu FROM tasks t JOIN jobs j ON j.id = t.job_id AND "
        "t.attempt = j.attempt WHERE t.job_id IN (SELECT value FROM json_each(?)) AND +t.state = 'WAITING' "
        "ORDER BY t.job_id, t.rowid",
        (ids,),
    ):
        view = out.get(row["job_id"])
        if view is not None:
            view["tasks"].append((row["cpu"], row["memory_mb"], row["gpu"]))
    return {k: v for k, v in out.items() if v["tasks"]}
