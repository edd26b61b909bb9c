"""The embedded cluster's core, ``Cluster``: the composition root (docs/architecture.md) that builds and wires the
parts, with submit (and the checks a job must pass) and recover; the parts each hold one concern and are handed
what they need:
``ClusterState`` (state.py: what the cluster holds, lookups), ``Launcher`` (launching.py: schedule, start,
watch; given ``Ending.task_ended``), ``Ending`` (ending.py: a task's end, retries, stop, delete, time limits;
given ``Cluster.schedule``), and recovery.py (start-up, through this class's public methods).

Handlers use the parts through it (``cluster.store``, ``cluster.state``) and these methods; all state changes go
through the store in one transaction each, then the scheduler runs. Tasks are watched by one asyncio task each
(``runtime.wait``), so a task's end is seen at once, and the same watchers are rebuilt from the database after a
restart.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...protocol import Job, JobValidationError
from ...protocol.rules import ESTIMATOR_KEY
from ..runtime.base import Runtime, TaskHandle, TaskSpec
from ..runtime.ports import PortAllocator
from ..task import services
from ..task.codecopy import CodeTooBig, Selection
from ..task.env import Placement, make_job_logs
from ..task.estimator import Layout, is_remote
from ..task.estimator import problems as estimator_problems
from . import recovery
from .accounts import Accounts
from .ending import Ending
from .errors import (
    ConflictJobError,
    ForbiddenUserError,
    InsufficientResourceError,
    InvalidProtocolError,
)
from .launching import Launcher
from .notify import Notifier, NotifyConfig
from .priority import job_priority
from .queue import JobQueue
from .scheduler import Capacity, Resources
from .sharing import Sharing
from .space import DEFAULT_FLOOR_MB, InsufficientStorageError, Space, is_full
from .state import ClusterState
from .store import JobCore, JobWithConfig, Store, TaskRow, now_ms
from .store.tracking import TrackedRun, save_run

MAX_TASKS = 1000  # per job: every task is a row, a process or container, and a line in each detail
MAX_PORTS_PER_TASK = 100


def port_problems(job: Job, admin: bool) -> list[str]:
    """Fixed host ports (v1 ``portList.beginAt``) are the cluster owner's to ask for, never below 1024; everyone
    else's ports come from the free ones the system hands out."""
    out = []
    for r in job.task_roles:
        for p in r.ports:
            if p.begin_at and p.begin_at < 1024:
                out.append(f"task role {r.name} port {p.label}: beginAt {p.begin_at} is a privileged port (below 1024)")
            elif p.begin_at and not admin:
                out.append(
                    f"task role {r.name} port {p.label}: only an admin may ask for a fixed port (beginAt "
                    f"{p.begin_at}); leave beginAt 0 to get free ones"
                )
    return out


def name_problems(user: str, job: Job) -> list[str]:
    """The job's directory ``<user>~<name>`` must fit a file name (255 bytes)."""
    size = len(f"{user}~{job.name}".encode())
    return (
        [f"the job name is too long here: {user}~{job.name[:20]}... is {size} bytes, a file name takes 255"]
        if size > 255
        else []
    )


def unused_images(runtime: Runtime, job: Job) -> str:
    """What a job whose images this runtime does not use is told in its events (``TaskView.unused_images``)."""
    return runtime.view.unused_images(
        runtime.name, sorted({image for r in job.task_roles if (image := job.image_for(r))})
    )


class Cluster:
    """The cluster the handlers drive: ``submit`` and ``recover`` here; the rest passed on to the part that holds
    it (``state``, ``launcher``, ``ending``), so none of them needs this class or another part's internals."""

    def __init__(
        self,
        local_dir: Path,
        runtime: Runtime,
        capacity: Capacity,
        *,
        stop_grace: float = 3.0,
        min_free_mb: int = DEFAULT_FLOOR_MB,
        notify: NotifyConfig | None = None,
        sharing: Sharing | None = None,
    ) -> None:
        self.state = ClusterState(
            local_dir, runtime, capacity, stop_grace=stop_grace, min_free_mb=min_free_mb, notify=notify, sharing=sharing
        )
        self.ending = Ending(self.state, schedule=self.schedule)
        self.launcher = Launcher(self.state, task_ended=self.ending.task_ended, preempt=self.ending.preempt)

    # ---- what the cluster holds (state.py) -----------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self.state.dir

    @property
    def store(self) -> Store:
        return self.state.store

    @property
    def runtime(self) -> Runtime:
        return self.state.runtime

    @property
    def runtime_description(self) -> str:
        return self.state.runtime_description

    @property
    def capacity(self) -> Capacity:
        return self.state.capacity

    @property
    def ports(self) -> PortAllocator:
        return self.state.ports

    @property
    def queue(self) -> JobQueue:
        return self.state.queue

    @property
    def space(self) -> Space:
        return self.state.space

    @property
    def notifier(self) -> Notifier:
        return self.state.notifier

    @property
    def accounts(self) -> Accounts:
        return self.state.accounts

    @property
    def spawner(self) -> ThreadPoolExecutor:
        return self.state.spawner

    @property
    def stop_grace(self) -> float:
        return self.state.stop_grace

    @property
    def watchers(self) -> dict[tuple[int, int, str, int], asyncio.Task[None]]:
        return self.state.watchers

    # ---- lookups (state.py) --------------------------------------------------------------------------------------
    def job_model(self, row: JobCore) -> Job:
        return self.state.job_model(row)

    def forget_model(self, job_id: int) -> None:
        self.state.forget_model(job_id)

    def get_job(self, user: str, name: str) -> JobWithConfig:
        return self.state.get_job(user, name)

    def job_dir(self, user: str, name: str) -> Path:
        return self.state.job_dir(user, name)

    def task_dir(self, row: JobCore, attempt: int, role: str, idx: int, task_attempt: int) -> Path:
        return self.state.task_dir(row, attempt, role, idx, task_attempt)

    def is_admin(self, user: str) -> bool:
        return self.state.is_admin(user)

    def user_home(self, user: str) -> Path:
        return self.state.user_home(user)

    def forget_home(self, user: str) -> None:
        self.state.forget_home(user)

    def layout(self, row: JobCore, job: Job) -> Layout | None:
        return self.state.layout(row, job)

    def task_spec(self, row: JobCore, job: Job, t: TaskRow, placements: dict[tuple[str, int], Placement]) -> TaskSpec:
        return self.state.task_spec(row, job, t, placements)

    # ---- scheduling and starting (launching.py) ------------------------------------------------------------------
    def schedule(self) -> None:
        self.launcher.schedule()

    def watch(self, job_id: int, t: TaskRow, handle: TaskHandle) -> None:
        self.launcher.watch(job_id, t, handle)

    def waiting_reason(self, row: JobCore) -> str | None:
        return self.state.waiting_reason(row)

    # ---- ends, stops, deletes (ending.py) ------------------------------------------------------------------------
    def stop(self, row: JobCore, reason: str) -> None:
        self.ending.stop(row, reason)

    def resume_stop(self, row: JobCore) -> None:
        self.ending.resume_stop(row)

    def preempt(self, row: JobCore, reason: str) -> bool:
        return self.ending.preempt(row, reason)

    def fair_share_usage(self) -> dict[str, float]:
        """Each user's decayed usage now (machine-seconds; empty where fair share is off)."""
        return self.launcher.shares.read_usage() if self.state.sharing.half_life_s > 0 else {}

    def resume_completion(self, row: JobCore) -> None:
        self.ending.resume_completion(row)

    def check_deadlines(self) -> None:
        self.ending.check_deadlines()

    def delete(self, row: JobCore) -> None:
        self.ending.delete(row)

    # ---- submit --------------------------------------------------------------------------------------------------
    def admit_user(self, name: str) -> None:
        """Raise (409, saying why and what to use instead) when a new user could not be kept apart from the
        others: the process runtime of a daemon that is not root (see core/accounts.py)."""
        self.accounts.admission(name, self.store.user_names())

    def submit(
        self,
        user: str,
        body: bytes,
        *,
        admin: bool = False,
        job: Job | None = None,
        run: TrackedRun | str | None = None,
    ) -> dict[str, Any]:
        """``job``: ``body`` already parsed (the API parses off the event loop); ``run``: its MLflow run, made
        before (``tracking.tracker``) and recorded with it, or why tracking could not make one (an event)."""
        try:
            job = job if job is not None else Job.from_text(body)
        except JobValidationError as exc:
            raise InvalidProtocolError("; ".join(str(p) for p in exc.problems), extra=exc.to_dict()) from None
        estimator = self._check(user, job, admin)
        code = self._code(user, job, estimator)
        demands = [Resources(r.cpu, r.memory_mb, r.gpu) for r in job.task_roles for _ in range(r.instances)]
        reason = self.capacity.never_fits(job.virtual_cluster, demands, job.gang_allocation)
        room, wanted = self.ports.room(), services.ports_wanted(job)
        if room is not None and wanted > room and not reason:
            span = self.ports.span or (0, 0)
            reason = f"its tasks want {wanted} ports and the cluster hands out {room} ({span[0]}-{span[1]}, taskPorts)"
        if reason:
            raise InsufficientResourceError(f"job {job.name} can never run here: {reason}")
        short = self.space.short()
        if short:
            raise InsufficientStorageError(f"job {job.name} was not submitted: {short}")
        now = now_ms()
        try:
            with self.store.tx():
                job_id = self._record(user, body, job, demands, now, run)
                self._prepare_dir(user, job_id, job, estimator, code)
        except sqlite3.IntegrityError:
            raise ConflictJobError(f"job {user}~{job.name} already exists; choose another name") from None
        except (OSError, sqlite3.OperationalError) as exc:  # nothing was written
            if is_full(exc):
                shutil.rmtree(self.job_dir(user, job.name), ignore_errors=True)
                raise self.space.error(f"job {job.name} was not submitted") from None
            if not isinstance(exc, OSError):
                raise
            # the Estimator's source dir could not be copied
            shutil.rmtree(self.job_dir(user, job.name), ignore_errors=True)
            raise InvalidProtocolError(f"could not prepare the job's /ml layout: {exc}") from None
        self.state.models[job_id] = job
        self.queue.set_order(job_id, job_priority(job), None, now)
        self.queue.add(job.virtual_cluster, now, job_id)
        self.schedule()
        return {"status": 202, "message": f"job {user}~{job.name} submitted", "name": job.name, "username": user}

    @staticmethod
    def _check(user: str, job: Job, admin: bool) -> Any:
        """Raise when the job is too big, asks for ports or host paths it may not, or its Estimator lacks a part;
        else its Estimator extras (``ESTIMATOR_KEY``), whatever they are."""
        too_big = (
            [f"the job has {job.total_tasks} tasks; the local cluster takes at most {MAX_TASKS} per job"]
            if job.total_tasks > MAX_TASKS
            else []
        )
        too_big += port_problems(job, admin) + name_problems(user, job)
        too_big += [
            f"task role {r.name} asks for {n} ports per task; at most {MAX_PORTS_PER_TASK}"
            for r in job.task_roles
            if (n := sum(p.count for p in r.ports)) > MAX_PORTS_PER_TASK
        ]
        if too_big:
            raise InvalidProtocolError("; ".join(too_big))
        estimator = job.extras.get(ESTIMATOR_KEY)
        if isinstance(estimator, dict):
            if not admin and (
                estimator.get("sourceDir") or any(not is_remote(u) for u in (estimator.get("inputs") or {}).values())
            ):
                raise ForbiddenUserError("only the cluster's owner may give host paths (sourceDir, inputs)")
            missing = estimator_problems(estimator)
            if missing:
                raise InvalidProtocolError("; ".join(missing))
        return estimator

    def _record(
        self, user: str, body: bytes, job: Job, demands: list[Resources], now: int, run: TrackedRun | str | None
    ) -> int:
        """The job's rows (its first attempt, priority, run and events), inside the caller's transaction."""
        job_id = self.store.insert_job(
            user,
            job.name,
            vc=job.virtual_cluster,
            now=now,
            total_gpu=sum(d.gpu for d in demands),
            total_tasks=len(demands),
            total_roles=len(job.task_roles),
            config_format=job.source_format,
            config_text=job.source_text if job.source_text is not None else body.decode("utf-8-sig"),
            model=job.model_dump_json(),
        )
        self.state.new_attempt(job_id, 0, job)
        if job_priority(job) is not None:
            self.store.set_priority(job_id, job_priority(job), None)
        self.store.add_event(job_id, "Normal", "Submitted", f"job submitted by {user} ({job.source_format})")
        if isinstance(run, TrackedRun):
            save_run(self.store, job_id, run)
        elif run is not None:
            self.store.add_event(job_id, "Warning", "NotTracked", f"this job has no MLflow run: {run}")
        if unused := unused_images(self.runtime, job):
            self.store.add_event(job_id, "Warning", "ImageNotUsed", unused)
        return job_id

    def _prepare_dir(self, user: str, job_id: int, job: Job, estimator: Any, code: Selection | None) -> None:
        """The job's logs dir and, for an Estimator, its /ml layout with the code copied, given to the job's
        account before any task can write (or plant) there; inside the transaction, so a failure leaves no job."""
        make_job_logs(self.job_dir(user, job.name))  # PAI_OUTPUT_LOGS, ahead of the start (task/env.py)
        if isinstance(estimator, dict):
            Layout(self.job_dir(user, job.name) / "ml", estimator).create(code)
            if code is not None:
                self.store.add_event(job_id, "Normal", "CodeCopied", code.describe())
            self.accounts.give(self.job_dir(user, job.name) / "ml", self.accounts.run_as(user), tree=True)

    def _code(self, user: str, job: Job, estimator: Any) -> Selection | None:
        """What of the job's source dir is its code (``task/codecopy.py``), chosen before anything is written: never
        this cluster's home (the new job's own dir is in it); a selection past the bound refuses the job."""
        if not isinstance(estimator, dict):
            return None
        try:
            return Layout(self.job_dir(user, job.name) / "ml", estimator).code(skip=[self.state.dir.parent])
        except CodeTooBig as exc:
            raise InvalidProtocolError(str(exc)) from None

    # ---- recovery ------------------------------------------------------------------------------------------------
    def recover(self) -> None:
        """Re-attach to tasks that were running when the daemon stopped; collect those that ended meanwhile."""
        recovery.recover(self)

    def watch_lost(self) -> int:
        """Record the end of tasks whose watcher is gone but whose exit status is on disk (the daemon's tick)."""
        return recovery.watch_lost(self)
