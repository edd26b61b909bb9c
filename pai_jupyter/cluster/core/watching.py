"""A started task's watcher: where a batch system's scheduler runs it (``launches.Handed``), then its end,
handed to ``task_ended`` (on a full disk once there is room). On such a runtime a task's exit status is a file of
the task's own account (Slurm: its ``run/exit_code``), which it can write while it runs on: so the end of the last
active task the daemon knows in an allocation is recorded only once the runtime has seen that allocation end, or
ended it (``Batch.end_allocation``). Nothing of a job outlives its recorded end, unaccounted."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...common.states import ACTIVE_TASK
from ...protocol import Job
from ..runtime.base import TaskExit, TaskHandle, Where
from .state import ClusterState
from .store import JobCore, Store, TaskRow, dumps, loads, now_ms

log = logging.getLogger("pai_jupyter.cluster")

TaskEnded = Callable[[int, TaskRow, TaskExit, TaskHandle | None], None]
"""Where a task's end goes: ``(job id, task row, its exit, its handle or None when it never started)``."""


def job_running(state: ClusterState, row: JobCore, job: Job, now: int) -> None:
    """The job's attempt runs: its max run time counts from now (written in the caller's transaction; the
    caller notifies once it is committed)."""
    deadline = (time.time() + job.max_run_time_minutes * 60) if job.max_run_time_minutes else None
    state.store.update_job(
        row["id"],
        state="RUNNING",
        sub_state="AttemptRunning",
        waiting_reason=None,
        launched_time=row["launched_time"] or now,
        deadline=deadline,
    )
    state.store.update_attempt(row["id"], row["attempt"], state="RUNNING", launched_time=now)
    row["state"] = "RUNNING"


def set_waiting(store: Store, row: JobCore, reason: str) -> None:
    if row.get("waiting_reason") != reason:
        store.update_job(row["id"], waiting_reason=reason)
        row["waiting_reason"] = reason


class Watcher:
    """One watcher (an asyncio task, in ``state.watchers``) per started task."""

    def __init__(self, state: ClusterState, task_ended: TaskEnded) -> None:
        self.state, self.task_ended = state, task_ended
        self.store, self.runtime, self.launch = state.store, state.runtime, state.launch

    def watch(self, job_id: int, t: TaskRow, handle: TaskHandle) -> None:
        """Wait for the started task ``t`` in the background and record its end (recovery re-attaches with it; so
        does the daemon's tick, ``recovery.watch_lost``, should this watcher end without recording it). On a full
        disk the end is recorded once there is space (``Space.eventually``); the watcher is registered until then."""
        key = (job_id, t["attempt"], t["role"], t["idx"])
        task_dir = t["task_dir"]
        assert task_dir is not None  # set when the task was launched (STARTING)
        space, what = self.state.space, f"recording the end of {t['role']}[{t['idx']}] of job {job_id}"

        async def watch() -> None:
            try:
                where = await self.launch.placed(handle, Path(task_dir), lambda why: self._queued(job_id, why))
                if where is not None:  # (None: it ran from its start, or never ran)
                    await space.eventually(lambda: self._task_running(job_id, t, handle, where), what)
                result = await self.runtime.wait(handle, Path(task_dir))
                # the check and the record below are one turn of the loop: of tasks that end together, one is last
                last = lambda: self._last_in_allocation(job_id, t, handle)  # noqa: E731
                said = await self.launch.allocation_ended(handle, last)
                if said:
                    result = replace(result, diagnostics=f"{result.diagnostics}; {said}".strip("; "))
            except Exception as exc:
                log.exception("waiting for %s failed", key)
                result = TaskExit(exit_code=255, diagnostics=f"lost track of the task: {exc}")
            try:
                await space.eventually(lambda: self.task_ended(job_id, t, result, handle), what)
            except Exception:
                log.exception("%s failed; the daemon's tick tries again", what)
            finally:
                if self.state.watchers.get(key) is me:  # (a retried task's next watcher may hold the key by now)
                    del self.state.watchers[key]

        me = self.state.watchers[key] = asyncio.ensure_future(watch())

    def _last_in_allocation(self, job_id: int, t: TaskRow, handle: TaskHandle) -> bool:
        """No other active task of the job runs in ``handle``'s allocation (the runtime's job id)."""
        for other in self.store.tasks(job_id, t["attempt"]):
            if (other["role"], other["idx"]) == (t["role"], t["idx"]) or other["state"] not in ACTIVE_TASK:
                continue
            if other["handle"] and loads(other["handle"]).get("id") == handle.id:
                return False
        return True

    def _queued(self, job_id: int, why: str) -> None:
        """The runtime's scheduler says why the job's attempt still waits there (its "why waiting")."""
        row = self.store.job_core(job_id)
        if row is not None and row["state"] == "WAITING":
            set_waiting(self.store, row, why)

    def _task_running(self, job_id: int, t: TaskRow, handle: TaskHandle, where: Where) -> None:
        """A task the runtime's scheduler held runs now, at ``where``: the task table shows its node and IP, and
        its job runs from the first of its tasks that does."""
        current = self.store.task(job_id, t["attempt"], t["role"], t["idx"])
        row = self.store.job_core(job_id)
        if current is None or row is None or current["task_attempt"] != t["task_attempt"]:
            return
        placed = {"node": where.node, "ip": where.ip}
        if current["state"] != "STARTING" and loads(current["handle"], {}).get("info", {}).get("placed") == placed:
            return  # (re-attached after a restart: recorded already)
        handle.info["placed"] = placed
        changes: dict[str, Any] = {"handle": dumps(handle.to_dict()), "host_ip": where.ip}
        if where.gpus is not None:
            changes["gpus"] = dumps(where.gpus)
        job = None
        with self.store.tx():
            if current["state"] == "STARTING":
                changes["state"] = "RUNNING"
                self.store.add_event(
                    job_id,
                    "Normal",
                    "TaskStarted",
                    f"{t['role']}[{t['idx']}] started on node {where.node} ({where.ip})",
                    t["role"],
                    t["idx"],
                )
            self.store.update_task(current, **changes)
            if row["state"] == "WAITING" and row["attempt"] == t["attempt"]:
                job = self.state.job_model(row)
                job_running(self.state, row, job, now_ms())
        if job is not None:
            self.state.job_changed(row, job, "RUNNING")
