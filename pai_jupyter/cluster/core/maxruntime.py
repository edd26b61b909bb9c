"""Set a job's max run time ("work duration") while it waits or runs.

The new limit is written into the stored job model (``extras.maxRunTimeMinutes``), so the watchdog
(``Cluster.check_deadlines``), a retry's next attempt and a daemon restart all see it; a running attempt's
deadline is moved to its launch time plus the new limit (a limit already passed stops it at the next check).
An attempt that has its outcome and is being torn down (AttemptDeletionPending) gets no deadline: the new limit
is for the next attempt, if a retry makes one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...common.states import FINAL
from ...protocol.rules import MAX_RUN_TIME_KEY, minutes_text, run_time_problem
from .ending import DELETION_PENDING
from .errors import ApiError, BadRequest
from .store import JobCore

if TYPE_CHECKING:
    from .service import Cluster


class JobNotRunningError(ApiError):
    status, code = 409, "JobNotRunningError"


def check_minutes(value: Any) -> float:
    """The minutes of a request body, or a 400 that says what is wanted."""
    if problem := run_time_problem(value):
        raise BadRequest(f'the body must be {{"minutes": N}}: {problem}')
    return int(value) if float(value).is_integer() else float(value)


def set_max_run_time(cluster: Cluster, row: JobCore, minutes: float, by: str) -> dict[str, Any]:
    """Record the new limit durably and move the running attempt's deadline; returns the new deadline."""
    if row["state"] in FINAL or row["execution_type"] == "STOP":
        raise JobNotRunningError(f"job {row['user']}~{row['name']} is {row['state']}; its run time is over")
    job = cluster.job_model(row)
    extras = {**job.extras, MAX_RUN_TIME_KEY: minutes}
    model = job.model_copy(update={"extras": extras})
    deadline = None
    with cluster.store.tx():
        cluster.store.set_model_text(row["id"], model.model_dump_json())
        if row["state"] == "RUNNING" and row["sub_state"] != DELETION_PENDING:
            launched = cluster.store.attempt(row["id"], row["attempt"])
            started_ms = (launched and launched["launched_time"]) or row["launched_time"]
            assert started_ms is not None  # a RUNNING job was launched
            deadline = started_ms / 1000 + minutes * 60
            cluster.store.update_job(row["id"], deadline=deadline)
        cluster.store.add_event(
            row["id"], "Normal", "MaxRunTimeSet", f"max run time set to {minutes_text(minutes)} by {by}"
        )
    cluster.forget_model(row["id"])  # the parsed-model cache: read the stored one next time
    return {"minutes": minutes, "deadline": deadline}
