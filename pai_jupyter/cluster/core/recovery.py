"""Start-up after a stop or a crash (kill -9 included): re-attach to the tasks that were running, collect the
exit status of those that ended meanwhile (their shim wrote it to disk), rebuild the queue and the resource
accounting from the database, and finish stops and decided attempts (AttemptDeletionPending) that were in
flight, through Cluster's public methods (``Recovering``: what this module uses of it). While the daemon runs, its
tick re-attaches the same way to a task whose end went unrecorded (``watch_lost``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from ...common.states import ACTIVE_TASK, FINAL
from ..runtime.base import TaskHandle
from ..runtime.taskdir import exit_code
from .ending import DELETION_PENDING
from .scheduler import Resources
from .state import ClusterState
from .store import JobCore, TaskRow, loads

log = logging.getLogger("pai_jupyter.cluster")


class Recovering(Protocol):
    """What recovery uses of the cluster (``Cluster``, service.py): its state and four of its steps."""

    @property
    def state(self) -> ClusterState: ...

    def watch(self, job_id: int, t: TaskRow, handle: TaskHandle) -> None: ...

    def resume_completion(self, row: JobCore) -> None: ...

    def resume_stop(self, row: JobCore) -> None: ...

    def schedule(self) -> None: ...


def _never_ran(state: ClusterState, task_dir: str, handle: TaskHandle) -> bool:
    """A task caught STARTING whose shim is gone and left no exit status never ran its command (a shim that got
    no task exits without one); so it runs again rather than fail as lost (-1300)."""
    return not state.runtime.is_alive(handle) and exit_code(state.runtime.logs_dir(Path(task_dir))) is None


def recover(cluster: Recovering) -> None:
    state = cluster.state
    for t in state.store.live_tasks():
        row = state.store.job_by_id(t["job_id"])
        if row is None:
            continue
        if t["ports"] and t["attempt"] == row["attempt"] and row["state"] not in FINAL:
            for ports in loads(t["ports"]).values():
                state.ports.claim(ports)
        if t["state"] not in ACTIVE_TASK:
            continue
        demand, gpus = Resources(t["cpu"], t["memory_mb"], t["gpu"]), loads(t["gpus"], [])
        state.launch.take_again(t["vc"], demand, gpus)  # (a batch system holds its own accounting)
        assert t["task_dir"] is not None  # set when the task was launched (STARTING)
        # the store's handle, else the one the runtime wrote (root's, in the control part): never a task's word
        handle = TaskHandle.from_dict(loads(t["handle"])) if t["handle"] else state.runtime.find(t["task_dir"])
        if handle is not None and t["state"] == "STARTING" and _never_ran(state, t["task_dir"], handle):
            handle = None  # the daemon died while handing it over: the command never ran
        if handle is None:  # it never started: run it again
            with state.store.tx():
                state.launch.give_back(t["vc"], demand, gpus)
                state.store.update_task(t, state="WAITING", launched_time=None)
            continue
        if t["state"] == "STARTING":  # its start recorded as a start is (a batch system's: RUNNING once it runs)
            state.store.update_task(t, **state.launch.started(handle)[0])
        cluster.watch(t["job_id"], t, handle)
        if t["stopping"]:
            state.runtime.stop(handle, state.stop_grace)
    for row in state.store.jobs_in_sub_state(DELETION_PENDING):  # before the queue: its next attempt joins it
        cluster.resume_completion(row)
    state.queue.order.update(state.store.priorities())
    for queued in state.store.queued_jobs():
        state.queue.add(queued["vc"], queued["submission_time"], queued["id"])
    for row in state.store.jobs_in_state("STOPPING"):
        cluster.resume_stop(row)
    cluster.schedule()


def watch_lost(cluster: Recovering) -> int:
    """Re-attach to each active task that has no watcher and whose exit status is on disk: its end was never
    recorded (its watcher failed), so its job would stay RUNNING, holding its resources, until a restart. The
    daemon's tick calls this; the new watcher reads the exit status and records the end. How many it found."""
    state, found = cluster.state, 0
    for t in state.store.watched_tasks():
        key = (t["job_id"], t["attempt"], t["role"], t["idx"])
        if key in state.watchers or t["task_dir"] is None or t["handle"] is None:
            continue
        if exit_code(state.runtime.logs_dir(Path(t["task_dir"]))) is None:
            continue
        log.warning("task %s[%s] of job %s ended unrecorded: recording its end now", t["role"], t["idx"], t["job_id"])
        cluster.watch(t["job_id"], t, TaskHandle.from_dict(loads(t["handle"])))
        found += 1
    return found
