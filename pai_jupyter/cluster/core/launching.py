"""How jobs start: what the scheduling plan (backfill.py) picks from each virtual cluster's queue, each task's
ports and services planned, its spec written, the runtime started off the event loop, and a watcher per task
(watching.py). ``Launcher`` works on the shared ``ClusterState`` and hands every task's end (or failed start) to
the ``task_ended`` it is given (``Ending.task_ended``, ending.py). A start the full disk refuses loses nothing: a
job whose launch could not be written is queued again, a launched task whose files could not be written starts
again, and a start that could not be recorded is recorded, each once there is room (``Space.again``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import cast

from ...protocol import Job
from ..runtime import taskdir
from ..runtime.base import TaskExit, TaskHandle, TaskSpec, TaskStartError
from ..runtime.ports import PortsExhausted
from ..task import services
from ..task.env import Placement
from ..task.taskspec import owned_parts, prepare_task_dir
from .backfill import Busy, Plan, Waiting, plan
from .scheduler import Resources
from .shares import Shares
from .space import for_want_of_space, is_full
from .state import ClusterState, demand
from .store import JobCore, TaskRow, dumps, loads, now_ms
from .store.waiting import waiting_views
from .watching import TaskEnded, Watcher, job_running, set_waiting

log = logging.getLogger("pai_jupyter.cluster")
PORTS_AGAIN_S = 5.0  # a job that found no free ports is tried again this often (a task's end also tries it)


class Launcher:
    """Scheduling and starting; a started task's end goes to ``task_ended``."""

    def __init__(self, state: ClusterState, task_ended: TaskEnded, preempt: Callable[[JobCore, str], bool]) -> None:
        self.state = state
        self.task_ended = task_ended
        self.shares = Shares(state, preempt)  # quotas and fair share before each plan, preemption after it
        # the shared objects every path uses, by their short names (ClusterState never replaces them)
        self.store, self.runtime, self.capacity, self.queue = state.store, state.runtime, state.capacity, state.queue
        self.launch = state.launch  # placed here or handed to a batch system's scheduler (launches.py)
        # ``schedule``: one pass at a time; ``_ports_again``: one pass waiting for ports at a time
        self._scheduling = self._again = self._ports_due = False
        self.watcher = Watcher(state, lambda *end: self.task_ended(*end))  # (this one's, replaced or not)

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
                Waiting(job_id, tuple(view["tasks"]), view["gang"], minutes * 60 if minutes else None, view["user"])
                if view
                else None
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
        result = self.launch.plan(queues, self._own_plan)
        for job_id, n in result.starts:
            row = self.store.job_core(job_id)
            tasks = self.store.waiting_tasks(job_id, row["attempt"]) if row else []
            self.queue.info.pop(job_id, None)
            if row is None or len(tasks) < n:  # changed since it was read: plan again
                self._again = True
                continue
            if len(tasks) == n:
                self.queue.remove(job_id)
            if not self._launched(row, tasks[:n]):
                return
        for head in result.heads.values():
            if head.shadow is not None:
                self.queue.reserved[head.job_id] = head.shadow
            row = self.store.job_core(head.job_id)
            short = Resources(*head.need).shortfall(Resources(*head.room))
            if row is not None and short:
                set_waiting(self.store, row, short)
        self.shares.after(result)

    def _own_plan(self, queues: dict[str, list[Waiting]]) -> Plan:
        """The daemon's plan (backfill.py) on its capacity, after per-user quotas and fair share (shares.py)."""
        cap = self.capacity
        total = (cap.total.cpu, cap.total.memory_mb, cap.total.gpu)
        quotas = {vc: (q.cpu, q.memory_mb, q.gpu) for vc, q in cap.quotas.items()}
        busy = [Busy(b["vc"], (b["cpu"], b["memory_mb"], b["gpu"]), b["deadline"]) for b in self.store.busy_tasks()]
        return plan(time.time(), total, quotas, busy, self.shares.shape({vc: q for vc, q in queues.items() if q}))

    def _launched(self, row: JobCore, tasks: list[TaskRow]) -> bool:
        """``_launch``; False when its writes failed for want of space or it found no free ports: nothing of it holds
        (its transaction rolled back, capacity and ports given back), the job is queued again and tried again later
        (ports: at the next task's end, or PORTS_AGAIN_S for those other programs held)."""
        what = f"starting job {row['user']}~{row['name']}"
        try:
            self._launch(row, self.state.job_model(row), tasks)
        except Exception as exc:
            if not (is_full(exc) or isinstance(exc, PortsExhausted)):
                raise
            self.queue.add(row["vc"], row["submission_time"], row["id"])
            if isinstance(exc, PortsExhausted):
                set_waiting(self.store, row, f"waiting for free ports: {exc}")
                self._ports_again()
            else:
                self.state.space.again("schedule", self.schedule, what)
            return False
        self.state.space.went_through("schedule", what)
        return True

    def _ports_again(self) -> None:
        if not self._ports_due:
            with contextlib.suppress(RuntimeError):  # (no loop: the next task's end schedules)
                asyncio.get_running_loop().call_later(PORTS_AGAIN_S, self._ports_due_now)
                self._ports_due = True

    def _ports_due_now(self) -> None:
        self._ports_due = False
        self.schedule()

    def watch(self, job_id: int, t: TaskRow, handle: TaskHandle) -> None:
        self.watcher.watch(job_id, t, handle)

    def _placements(
        self, row: JobCore, job: Job, allocated: list[list[int]] | None = None
    ) -> dict[tuple[str, int], Placement]:
        """Ports for every task of the attempt (allocated on first launch so each task's env can name them; each
        allocation also goes to ``allocated``, to give back should the caller's transaction fail)."""
        allocated = [] if allocated is None else allocated
        tasks = self.store.tasks(row["id"], row["attempt"])
        out = {}
        planned = services.planned(job)
        with self.store.tx():
            for t in tasks:
                ports = loads(t["ports"])
                if ports is None:
                    role = job.role(t["role"])
                    ports = {p.label: self.state.ports.allocate(p.count, p.begin_at) for p in role.ports}
                    allocated += ports.values()
                    mine = {}
                    for name, params in planned.get((t["role"], t["idx"]), {}).items():
                        ports[name] = self.state.ports.allocate(1)
                        allocated.append(ports[name])
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
        """Write the tasks' launch (STARTING, capacity, ports) in one transaction, then start them. Raises when the
        transaction fails, with what it took in memory given back."""
        now, vc, queued = now_ms(), row["vc"], self.launch.queued_reason()
        taken: list[tuple[Resources, list[int]]] = []
        allocated: list[list[int]] = []
        running = row["state"] == "WAITING" and queued is None
        try:
            with self.store.tx():
                for t in tasks:
                    taken.append((demand(t), self.launch.take(vc, demand(t))))
                    td = self.state.task_dir(row, t["attempt"], t["role"], t["idx"], t["task_attempt"])
                    self.store.update_task(
                        t,
                        state="STARTING",
                        gpus=dumps(taken[-1][1]),
                        task_dir=str(td),
                        runtime=self.runtime.name,
                        launched_time=now,
                    )
                if running:
                    job_running(self.state, row, job, now)
                elif row["state"] == "WAITING" and queued is not None:  # it runs once placed (``watch``)
                    set_waiting(self.store, row, queued)
                placements = self._placements(row, job, allocated)
                fresh = {(x["role"], x["idx"]): x for x in self.store.tasks(row["id"], row["attempt"])}
        except Exception:
            for need, gpus in taken:
                self.launch.give_back(vc, need, gpus)
            for ports in allocated:
                self.state.ports.release(ports)
            raise
        if running:
            self.state.job_changed(row, job, "RUNNING")
        for t in tasks:
            t.update(
                {"services": fresh[(t["role"], t["idx"])]["services"], "ports": fresh[(t["role"], t["idx"])]["ports"]}
            )
        self._start(row, job, tasks, placements)

    def _start(
        self, row: JobCore, job: Job, tasks: list[TaskRow], placements: dict[tuple[str, int], Placement]
    ) -> None:
        self.launch.start(self, row, job, tasks, placements)

    def start_each(
        self, row: JobCore, job: Job, tasks: list[TaskRow], placements: dict[tuple[str, int], Placement]
    ) -> None:
        """Start each task on its own (``Placed``)."""
        for t in tasks:
            self._start_task(row, job, t, placements)

    def start_together(
        self,
        row: JobCore,
        job: Job,
        tasks: list[TaskRow],
        placements: dict[tuple[str, int], Placement],
        start_job: Callable[[list[TaskSpec]], list[TaskHandle]],
    ) -> None:
        """Hand the tasks to a batch system's ``start_job`` in one call (one allocation for all; ``Handed``), in a
        worker thread."""
        try:
            ready = [(t, spec) for t in tasks if (spec := self._prepared(row, job, t, placements)) is not None]
        except Exception:  # for want of space (``_prepared`` ends the task on any other failure): all wait for room
            self._no_room(row["id"], tasks)
            return
        if not ready:
            return
        loop = asyncio.get_running_loop()

        def started(f: Future[list[TaskHandle]]) -> None:
            if for_want_of_space(f.exception()):
                self._no_room(row["id"], [t for t, _ in ready])
                return
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
            return start_job(specs)

        future = self.state.spawner.submit(submit, [spec for _, spec in ready])
        future.add_done_callback(lambda f: loop.call_soon_threadsafe(started, f))

    def _prepared(
        self, row: JobCore, job: Job, t: TaskRow, placements: dict[tuple[str, int], Placement]
    ) -> TaskSpec | None:
        """The task's spec with its directories made for its account, or None when that failed (recorded); raises
        when it failed for want of space (the start is tried again: ``_no_room``)."""
        try:
            spec = self.state.task_spec(row, job, t, placements)
            if spec.run_as is not None:  # the job's directory stays root's; what the task writes is its account's
                prepare_task_dir(spec)
                self.state.accounts.check_reachable()
                taskdir.share(spec.task_dir.parent, spec.run_as)
                for part in owned_parts(spec.task_dir):
                    taskdir.give(part, spec.run_as)
        except Exception as exc:  # e.g. the task dir cannot be written
            if for_want_of_space(exc):
                raise
            log.exception("preparing %s failed", t)
            self.task_ended(row["id"], t, TaskExit(exit_code=255, diagnostics=f"the task could not start: {exc}"), None)
            return None
        return spec

    def _start_task(self, row: JobCore, job: Job, t: TaskRow, placements: dict[tuple[str, int], Placement]) -> None:
        """Start the task here when the runtime can do it in a few file operations (a warm shim), else in a
        worker thread: a fork/exec or a Docker create must not hold up the event loop. Either way ``_started``
        records the outcome from a later turn of the loop."""
        loop = asyncio.get_running_loop()
        quick: Future[TaskHandle] = Future()
        try:
            spec = self._prepared(row, job, t, placements)
            if spec is None:
                return
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
        """``_started``; on a disk that stays full, tried again until there is room (the task runs meanwhile; its
        watcher starts once its start is recorded, and a restarted daemon finds it by its handle.json)."""
        record = lambda: self._started(job_id, t, future)  # noqa: E731
        try:
            self.state.space.with_room(record)
        except Exception as exc:
            if not is_full(exc):
                raise
            self.state.space.in_background(record, f"recording the start of {t['role']}[{t['idx']}] of job {job_id}")

    def _started(self, job_id: int, t: TaskRow, future: Future[TaskHandle]) -> None:
        exc = future.exception()
        if exc is not None and for_want_of_space(exc):
            self._no_room(job_id, [t])
            return
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
        self.state.space.went_through(_key(t), f"starting {t['role']}[{t['idx']}] of job {job_id}")
        current = self.store.task(job_id, t["attempt"], t["role"], t["idx"])
        with self.store.tx():
            if current is not None and current["task_attempt"] == t["task_attempt"]:
                fields, reason, said = self.launch.started(handle)
                self.store.update_task(t, **fields)
                self.store.add_event(job_id, "Normal", reason, f"{t['role']}[{t['idx']}] {said}", t["role"], t["idx"])
        self.watch(job_id, t, handle)
        if current is None:  # deleted while it was starting
            self.runtime.stop(handle, self.state.stop_grace)
        elif current["stopping"] and (row := self.store.job_core(job_id)) is not None:  # stopped meanwhile: as the
            self.runtime.stop(handle, *self.state.stop_order(row))  # attempt's others (a preemption: its signal)

    def _no_room(self, job_id: int, tasks: list[TaskRow]) -> None:
        """The disk is full: these launched tasks (STARTING, their capacity and ports held) did not start. They
        start again after a wait that doubles while it stays full, with nothing written meanwhile (the database
        may be full too); a daemon restarted meanwhile starts them again from WAITING (recovery)."""
        what = f"starting {tasks[0]['role']}[{tasks[0]['idx']}] of job {job_id}"
        self.state.space.again(_key(tasks[0]), lambda: self._start_again(job_id, tasks, what), what)

    def _start_again(self, job_id: int, tasks: list[TaskRow], what: str) -> None:
        """Start again those of ``tasks`` still STARTING with no handle; one stopped meanwhile ends unstarted."""
        try:
            row = self.store.job_core(job_id)
            live = []
            for t in tasks if row is not None else []:
                now = self.store.task(job_id, t["attempt"], t["role"], t["idx"])
                if now is None or now["task_attempt"] != t["task_attempt"] or now["state"] != "STARTING":
                    continue
                if now["stopping"]:
                    self.task_ended(job_id, now, TaskExit(255, "stopped before it could start (a full disk)"), None)
                elif not now["handle"]:
                    live.append(now)
            if row is None or not live:
                self.state.space.went_through(_key(tasks[0]), what)
            else:
                job = self.state.job_model(row)
                self._start(row, job, live, self._placements(row, job))
        except Exception as exc:
            if not is_full(exc):
                raise
            self._no_room(job_id, tasks)


def _key(t: TaskRow) -> tuple[int, int, str, int, int]:
    return (t["job_id"], t["attempt"], t["role"], t["idx"], t["task_attempt"])
