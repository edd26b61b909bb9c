"""Start-up after a stop or a crash (kill -9 included): re-attach to the tasks that were running, collect the
exit status of those that ended meanwhile (their shim wrote it to disk), rebuild the queue and the resource
accounting from the database, and finish stops and decided attempts (AttemptDeletionPending) that were in
flight, through Cluster's public methods."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common.states import ACTIVE_TASK, FINAL
from ..runtime.base import TaskHandle
from .ending import DELETION_PENDING
from .scheduler import Resources
from .store import dumps, loads

if TYPE_CHECKING:
    from .service import Cluster


def recover(cluster: Cluster) -> None:
    for t in cluster.store.live_tasks():
        row = cluster.store.job_by_id(t["job_id"])
        if row is None:
            continue
        if t["ports"] and t["attempt"] == row["attempt"] and row["state"] not in FINAL:
            for ports in loads(t["ports"]).values():
                cluster.ports.claim(ports)
        if t["state"] not in ACTIVE_TASK:
            continue
        demand, gpus = Resources(t["cpu"], t["memory_mb"], t["gpu"]), loads(t["gpus"], [])
        cluster.capacity.take(t["vc"], demand, gpus)
        assert t["task_dir"] is not None  # set when the task was launched (STARTING)
        handle = TaskHandle.from_dict(loads(t["handle"])) if t["handle"] else cluster.runtime.find(t["task_dir"])
        if handle is None:  # it never started: run it again
            with cluster.store.tx():
                cluster.capacity.give_back(t["vc"], demand, gpus)
                cluster.store.update_task(t, state="WAITING", launched_time=None)
            continue
        if t["state"] == "STARTING":
            cluster.store.update_task(t, state="RUNNING", handle=dumps(handle.to_dict()))
        cluster.watch(t["job_id"], t, handle)
        if t["stopping"]:
            cluster.runtime.stop(handle, cluster.stop_grace)
    for row in cluster.store.jobs_in_sub_state(DELETION_PENDING):  # before the queue: its next attempt joins it
        cluster.resume_completion(row)
    for queued in cluster.store.queued_jobs():
        cluster.queue.add(queued["vc"], queued["submission_time"], queued["id"])
    for row in cluster.store.jobs_in_state("STOPPING"):
        cluster.resume_stop(row)
    cluster.schedule()
