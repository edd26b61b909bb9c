"""How jobs start: what the scheduling plan (backfill.py) picks from each virtual cluster's queue, each task's
ports and services planned, its spec written, the runtime started off the event loop, and a watcher per task.
``Launcher`` works on the shared ``ClusterState`` and hands every task's end (or failed start) to the
``task_ended`` it is given (``Ending.task_ended``, ending.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, cast

from ...protocol import Job
from ..runtime import taskdir
from ..runtime.base import TaskExit, TaskHandle, TaskSpec, TaskStartError, Where
from ..task import services
from ..task.env import Placement
from ..task.taskspec import owned_parts, prepare_task_dir
from .backfill import Busy, Waiting, plan
from .scheduler import Resources
from .state import ClusterState, demand
from .store import JobCore, TaskRow, dumps, loads, now_ms
from .store.waiting import waiting_views

log = logging.getLogger("pai_jupyter.cluster")


TaskEnded = Callable[[int, TaskRow, TaskExit, TaskHandle | None], None]
"""Where a task's end goes: ``(job id, task row, its exit, its handle or None when it never started)``."""


class Launcher:
    """Scheduling and starting; a started task's end goes to ``task_ended``."""

    def __init__(self, state: ClusterState, task_ended: TaskEnded) -> None:
        self.state = state
        self.task_ended = task_ended
        # the shared objects every path uses, by their short names (ClusterState never replaces them)
        self.store, self.runtime, self.capacity, self.queue = state.store, state.runtime, state.capacity, state.queue
        self._scheduling = self._again = False  # (``schedule``: one pass at a time)

    # ---- scheduling ----------------------------------------------------------------------------------------------
    def schedule(self) -> None:
        """Start what the plan says (core/backfill.py: priority order, a reservation for each line's head, EASY
        backfill behind it). A start asked for while one runs (a task that failed to start ends its job) is run
        again after it."""
        if self._scheduling:
            self._again = True
            return
        self._scheduling, self._again = True, True
        try:
            while self._again:
                self._again = False
                self._schedule_once()
        finally:
            self._scheduling = False

    def _read_waiting(self, job_ids: list[int]) -> None:
        """Put the scheduler's view of each of these queued jobs into the queue's ``info``, read in bulk
        (store/waiting.py: no job model parsed); a job that waits for nothing now gets None."""
        views = waiting_views(self.store, job_ids)
        for job_id in job_ids:
            view = views.get(job_id)
            minutes = view["max_run_time_minutes"] if view else None
            self.queue.info[job_id] = (
                Waiting(job_id, tuple(view["tasks"]), view["gang"], minutes * 60 if minutes else None) if view else None
            )

    def _schedule_once(self) -> None:
        missing = [j for vc in self.queue.by_vc for j in self.queue.ids(vc) if j not in self.queue.info]
        self._read_waiting(missing)
        queues: dict[str, list[Waiting]] = {}
        for vc in list(self.queue.by_vc):
            line = queues.setdefault(vc, [])
            for job_id in self.queue.ids(vc):
                waiting = cast("Waiting | None", self.queue.info.get(job_id))
                if waiting is None:
                    self.queue.remove(job_id)
                else:
                    line.append(waiting)
        self.queue.reserved = {}
        if not any(queues.values()):
            return
        if self.runtime.gang_submit:  # the runtime's scheduler decides: every waiting job goes to it now
            for line in queues.values():
                for waiting in line:
                    self._launch_all(waiting.id)
            return
        cap = self.capacity
        total = (cap.total.cpu, cap.total.memory_mb, cap.total.gpu)
        quotas = {vc: (q.cpu, q.memory_mb, q.gpu) for vc, q in cap.quotas.items()}
        busy = [Busy(b["vc"], (b["cpu"], b["memory_mb"], b["gpu"]), b["deadline"]) for b in self.store.busy_tasks()]
        result = plan(time.time(), total, quotas, busy, {vc: q for vc, q in queues.items() if q})
        for job_id, n in result.starts:
            row = self.store.job_core(job_id)
            tasks = self.store.waiting_tasks(job_id, row["attempt"]) if row else []
            self.queue.info.pop(job_id, None)
            if row is None or len(tasks) < n:  # changed since it was read: plan again
                self._again = True
                continue
            if len(tasks) == n:
                self.queue.remove(job_id)
            self._launch(row, self.state.job_model(row), tasks[:n])
        for head in result.heads.values():
            if head.shadow is not None:
                self.queue.reserved[head.job_id] = head.shadow
            row = self.store.job_core(head.job_id)
            short = Resources(*head.need).shortfall(Resources(*head.room))
            if row is not None and short:
                self._set_waiting(row, short)

    def _launch_all(self, job_id: int) -> None:
        self.queue.remove(job_id)
        row = self.store.job_core(job_id)
        if row is not None:
            self._launch(row, self.state.job_model(row), self.store.waiting_tasks(job_id, row["attempt"]))

    def waiting_reason(self, row: JobCore) -> str | None:
        """Why a job waits: at the head of its line, what it lacks; behind it, the job it waits behind and for
        what, and whether it could start now were it not for that job's reservation."""
        ahead = self.queue.position(row["vc"], row["submission_time"], row["id"])
        if ahead is None and self.runtime.gang_submit and row["state"] == "WAITING":
            return row["waiting_reason"]  # the runtime's scheduler's words (``_queued``)
        if ahead is None or row["execution_type"] != "START":
            return None
        if not ahead:
            return row["waiting_reason"]
        head = self.store.job_core(self.queue.ids(row["vc"])[0])
        reason = f"{ahead} job{'s' * (ahead != 1)} ahead in virtual cluster {row['vc']!r}"
        if head is None:
            return reason
        reason += f"; behind {head['user']}~{head['name']}"
        if head["waiting_reason"]:
            reason += f" ({head['waiting_reason']})"
        mine = self.queue.info.get(row["id"])
        if isinstance(mine, Waiting):
            short = Resources(*mine.total).shortfall(self.capacity.room(row["vc"]))
            reason += f"; this job {short}" if short else "; it would fit now, but could delay that job"
        return reason

    def _set_waiting(self, row: JobCore, reason: str) -> None:
        if row.get("waiting_reason") != reason:
            self.store.update_job(row["id"], waiting_reason=reason)
            row["waiting_reason"] = reason

    def _job_running(self, row: JobCore, job: Job, now: int) -> None:
        """The job's attempt runs: its max run time counts from now."""
        deadline = (time.time() + job.max_run_time_minutes * 60) if job.max_run_time_minutes else None
        self.store.update_job(
            row["id"],
            state="RUNNING",
            sub_state="AttemptRunning",
            waiting_reason=None,
            launched_time=row["launched_time"] or now,
            deadline=deadline,
        )
        self.store.update_attempt(row["id"], row["attempt"], state="RUNNING", launched_time=now)
        row["state"] = "RUNNING"
        self.state.notifier.changed(row, job, "RUNNING")

    def _placements(self, row: JobCore, job: Job) -> dict[tuple[str, int], Placement]:
        """Ports for every task of the attempt (allocated on first launch so each task's env can name them)."""
        tasks = self.store.tasks(row["id"], row["attempt"])
        out = {}
        planned = services.planned(job)
        with self.store.tx():
            for t in tasks:
                ports = loads(t["ports"])
                if ports is None:
                    role = job.role(t["role"])
                    ports = {p.label: self.state.ports.allocate(p.count, p.begin_at) for p in role.ports}
                    mine = {}
                    for name, params in planned.get((t["role"], t["idx"]), {}).items():
                        ports[name] = self.state.ports.allocate(1)
                        mine[name] = {
                            "port": ports[name][0],
                            "parameters": params,
                            # only the proxy and the task hold it; sshd takes keys, no token
                            "token": services.new_token() if services.wants_token(name) else None,
                            "basePath": services.base_path(row["user"], row["name"], t["role"], t["idx"], name),
                        }
                    self.store.update_task(
                        t, ports=dumps(ports), host_ip=self.runtime.host_ip, services=dumps(mine) if mine else None
                    )
                ip = t["host_ip"] or self.runtime.host_ip
                out[(t["role"], t["idx"])] = Placement(ip, ports, loads(t["gpus"], []))
        return out

    def _launch(self, row: JobCore, job: Job, tasks: list[TaskRow]) -> None:
        now = now_ms()
        with self.store.tx():
            for t in tasks:
                gpus = [] if self.runtime.gang_submit else self.capacity.take(row["vc"], demand(t))
                td = self.state.task_dir(row, t["attempt"], t["role"], t["idx"], t["task_attempt"])
                self.store.update_task(
                    t,
                    state="STARTING",
                    gpus=dumps(gpus),
                    task_dir=str(td),
                    runtime=self.runtime.name,
                    launched_time=now,
                )
            if row["state"] == "WAITING" and not self.runtime.gang_submit:
                self._job_running(row, job, now)
            elif row["state"] == "WAITING":  # it runs once the runtime's scheduler starts it (``watch``)
                self._set_waiting(row, f"submitted to the {self.runtime.name} runtime's scheduler")
            placements = self._placements(row, job)
            fresh = {(x["role"], x["idx"]): x for x in self.store.tasks(row["id"], row["attempt"])}
        for t in tasks:
            t.update(
                {"services": fresh[(t["role"], t["idx"])]["services"], "ports": fresh[(t["role"], t["idx"])]["ports"]}
            )
        if self.runtime.gang_submit:
            self._start_together(row, job, tasks, placements)
        else:
            for t in tasks:
                self._start_task(row, job, t, placements)

    def _start_together(
        self, row: JobCore, job: Job, tasks: list[TaskRow], placements: dict[tuple[str, int], Placement]
    ) -> None:
        """Hand the tasks to a ``gang_submit`` runtime in one call (one allocation for all), in a worker thread."""
        ready = [(t, spec) for t in tasks if (spec := self._prepared(row, job, t, placements)) is not None]
        if not ready:
            return
        loop = asyncio.get_running_loop()

        def started(f: Future[list[TaskHandle]]) -> None:
            for k, (t, _) in enumerate(ready):
                one: Future[TaskHandle] = Future()
                if f.exception() is not None:
                    one.set_exception(cast(BaseException, f.exception()))
                else:
                    one.set_result(f.result()[k])
                self._started_safely(row["id"], t, one)

        def submit(specs: list[TaskSpec]) -> list[TaskHandle]:
            for spec in specs:
                prepare_task_dir(spec)
            return self.runtime.start_job(specs)

        future = self.state.spawner.submit(submit, [spec for _, spec in ready])
        future.add_done_callback(lambda f: loop.call_soon_threadsafe(started, f))

    def _prepared(
        self, row: JobCore, job: Job, t: TaskRow, placements: dict[tuple[str, int], Placement]
    ) -> TaskSpec | None:
        """The task's spec with its directories made for its account, or None when that failed (recorded)."""
        try:
            spec = self.state.task_spec(row, job, t, placements)
            if self.runtime.gang_submit:  # a batch system's scheduler weighs it (the daemon's queue did for others)
                spec.priority = self.store.priorities_of([row["id"]]).get(row["id"])
            spec.run_as = self.state.accounts.run_as(row["user"])
            if spec.run_as is not None:  # the job's directory stays root's; what the task writes is its account's
                spec.env.setdefault("HOME", spec.env.get("PAI_USER_HOME", ""))
                prepare_task_dir(spec)
                self.state.accounts.check_reachable()
                taskdir.share(spec.task_dir.parent, spec.run_as)
                for part in owned_parts(spec.task_dir):
                    taskdir.give(part, spec.run_as)
        except Exception as exc:  # e.g. the task dir cannot be written
            log.exception("preparing %s failed", t)
            self.task_ended(row["id"], t, TaskExit(exit_code=255, diagnostics=f"the task could not start: {exc}"), None)
            return None
        return spec

    def _start_task(self, row: JobCore, job: Job, t: TaskRow, placements: dict[tuple[str, int], Placement]) -> None:
        """Start the task here when the runtime can do it in a few file operations (a warm shim), else in a
        worker thread: a fork/exec or a Docker create must not hold up the event loop. Either way ``_started``
        records the outcome from a later turn of the loop."""
        spec = self._prepared(row, job, t, placements)
        if spec is None:
            return
        loop = asyncio.get_running_loop()
        quick: Future[TaskHandle] = Future()
        try:
            prepare_task_dir(spec)
            handle = self.runtime.start_quick(spec)
        except Exception as exc:
            quick.set_exception(exc)
        else:
            if handle is None:
                future = self.state.spawner.submit(self.runtime.start, spec)
                future.add_done_callback(lambda f: loop.call_soon_threadsafe(self._started_safely, row["id"], t, f))
                return
            quick.set_result(handle)
        loop.call_soon(self._started_safely, row["id"], t, quick)

    def _started_safely(self, job_id: int, t: TaskRow, future: Future[TaskHandle]) -> None:
        self.state.space.with_room(lambda: self._started(job_id, t, future))

    def _started(self, job_id: int, t: TaskRow, future: Future[TaskHandle]) -> None:
        exc = future.exception()
        if exc is not None:
            if not isinstance(exc, TaskStartError):
                log.error("starting %s failed: %r", t, exc)
            result = (
                TaskExit(exit_code=exc.exit_code, diagnostics=exc.diagnostics)
                if isinstance(exc, TaskStartError)
                else TaskExit(exit_code=255, diagnostics=f"the task could not start: {exc}")
            )
            self.task_ended(job_id, t, result, None)
            return
        handle = future.result()
        current = self.store.task(job_id, t["attempt"], t["role"], t["idx"])
        with self.store.tx():
            if current is not None and current["task_attempt"] == t["task_attempt"]:
                if self.runtime.gang_submit:  # RUNNING once the runtime's scheduler runs it (``watch``)
                    self.store.update_task(t, handle=dumps(handle.to_dict()))
                    said = f"submitted to the {self.runtime.name} runtime as {handle.id}"
                else:
                    self.store.update_task(t, state="RUNNING", handle=dumps(handle.to_dict()))
                    said = f"started on the {self.runtime.name} runtime"
                self.store.add_event(
                    job_id,
                    "Normal",
                    "TaskSubmitted" if self.runtime.gang_submit else "TaskStarted",
                    f"{t['role']}[{t['idx']}] {said}",
                    t["role"],
                    t["idx"],
                )
        self.watch(job_id, t, handle)
        if current is None or current["stopping"]:  # stopped (or deleted) while it was starting
            self.runtime.stop(handle, self.state.stop_grace)

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
                if self.runtime.gang_submit:
                    where = await self.runtime.running(handle, Path(task_dir), lambda why: self._queued(job_id, why))
                    if where is not None:
                        await space.eventually(lambda: self._task_running(job_id, t, handle, where), what)
                result = await self.runtime.wait(handle, Path(task_dir))
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

    def _queued(self, job_id: int, why: str) -> None:
        """The runtime's scheduler says why the job's attempt still waits there (its "why waiting")."""
        row = self.store.job_core(job_id)
        if row is not None and row["state"] == "WAITING":
            self._set_waiting(row, why)

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
                self._job_running(row, self.state.job_model(row), now_ms())
