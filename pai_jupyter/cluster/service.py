"""The embedded cluster's core: submit, queue, start, complete, retry, stop, delete, recover.

Handlers call these methods; all state changes go through the store in one transaction each, then the
scheduler runs. Tasks are watched by one asyncio task each (``runtime.wait``), so a task's end is seen at
once, and the same watchers are rebuilt from the database after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sqlite3
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..common.states import ACTIVE_TASK, FINAL, LIVE_JOB
from ..protocol import Job, JobValidationError
from ..protocol.rules import ESTIMATOR_KEY
from . import completion, recovery, services
from .accounts import Accounts
from .env import HOST_IP, Placement
from .errors import (
    ConflictJobError,
    ForbiddenUserError,
    InsufficientResourceError,
    InvalidProtocolError,
    JobNotFinishedError,
    NoJobError,
)
from .estimator import Layout, is_remote
from .estimator import problems as estimator_problems
from .paths import os_user
from .queue import JobQueue
from .runtime.base import Runtime, TaskExit, TaskHandle, TaskStartError
from .scheduler import Capacity, PortAllocator, Resources
from .space import DEFAULT_FLOOR_MB, InsufficientStorageError, Space, is_full
from .store import Store, dumps, loads, now_ms
from .taskspec import prepare_task_dir, task_spec

log = logging.getLogger("pai_jupyter.cluster")
JOB_CACHE = 512
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
                out.append(f"task role {r.name} port {p.label}: only an admin may ask for a fixed port (beginAt "
                           f"{p.begin_at}); leave beginAt 0 to get free ones")
    return out


def name_problems(user: str, job: Job) -> list[str]:
    """The job's directory ``<user>~<name>`` must fit a file name (255 bytes)."""
    size = len(f"{user}~{job.name}".encode())
    return [f"the job name is too long here: {user}~{job.name[:20]}... is {size} bytes, a file name takes 255"
            ] if size > 255 else []


def _demand(task: dict[str, Any]) -> Resources:
    return Resources(task["cpu"], task["memory_mb"], task["gpu"])


class Cluster:
    def __init__(self, local_dir: Path, runtime: Runtime, capacity: Capacity, *, stop_grace: float = 3.0,
                 min_free_mb: int = DEFAULT_FLOOR_MB):
        self.dir = local_dir
        self.space = Space(local_dir, min_free_mb)
        self.store = Store(local_dir / "state.db")
        self.runtime = runtime
        self.capacity = capacity
        self.ports = PortAllocator()
        self.stop_grace = stop_grace
        self.watchers: dict[tuple[int, int, str, int], asyncio.Task[None]] = {}
        self._jobs: dict[int, Job] = {}
        self.queue = JobQueue()
        self._homes: set[str] = set()
        self.spawner = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pai-start")
        self.runtime_description = runtime.describe()
        self.accounts = Accounts(os_user(), runtime.name)
        self.accounts.open_path(local_dir)
        if self.accounts.describe():
            self.runtime_description += f"; {self.accounts.describe()}"

    # ---- helpers -------------------------------------------------------------------------------------------------
    def job_model(self, row: dict[str, Any]) -> Job:
        """The parsed job (a small LRU cache: parsing costs more than a lookup, and memory stays bounded)."""
        job = self._jobs.pop(row["id"], None)
        if job is None:
            text = row.get("model") or self.store.model_text(row["id"])
            if text is None:
                raise NoJobError(f"job {row.get('user')}~{row.get('name')} has no stored model")
            job = Job.model_validate_json(text)
        self._jobs[row["id"]] = job
        if len(self._jobs) > JOB_CACHE:
            self._jobs.pop(next(iter(self._jobs)))
        return job

    def forget_model(self, job_id: int) -> None:
        """Drop a job's cached model: its stored one changed (e.g. a new max run time) or the job is gone."""
        self._jobs.pop(job_id, None)

    def get_job(self, user: str, name: str) -> dict[str, Any]:
        row = self.store.job(user, name)
        if row is None:
            raise NoJobError(f"job {user}~{name} was not found")
        return row

    def task_dir(self, row: dict[str, Any], attempt: int, role: str, idx: int, task_attempt: int) -> Path:
        # one level per task attempt (a0.main-0.t0): every directory made costs up to a millisecond on some disks
        return self.job_dir(row["user"], row["name"]) / f"a{attempt}.{role}-{idx}.t{task_attempt}"

    def is_admin(self, user: str) -> bool:
        """Admins (the OS user who runs the daemon) may hand host paths to their tasks; others may not."""
        found = self.store.user(user)
        return bool(found and found["admin"])

    def user_home(self, user: str) -> Path:
        """The user's persistent home (LeinaoPAI's /userhome), made once."""
        path = self.dir / "users" / user / "home"
        if user not in self._homes:
            path.mkdir(parents=True, exist_ok=True)
            run_as = self.accounts.run_as(user)
            self.accounts.give(path.parent, run_as)
            self.accounts.give(path, run_as)
            self._homes.add(user)
        return path

    # ---- submit --------------------------------------------------------------------------------------------------
    def admit_user(self, name: str) -> None:
        """Raise (409, saying why and what to use instead) when a new user could not be kept apart from the
        others: the process runtime of a daemon that is not root (see accounts.py)."""
        self.accounts.admission(name, self.store.user_names())

    def layout(self, row: dict[str, Any], job: Job) -> Layout | None:
        """The Estimator's /ml tree of this job, when it asked for one."""
        spec = job.extras.get(ESTIMATOR_KEY)
        return Layout(self.job_dir(row["user"], row["name"]) / "ml", spec) if isinstance(spec, dict) else None

    def job_dir(self, user: str, name: str) -> Path:
        return self.dir / "jobs" / f"{user}~{name}"

    def submit(self, user: str, body: bytes, *, admin: bool = False, job: Job | None = None) -> dict[str, Any]:
        """``job``: ``body`` already parsed (the API parses off the event loop)."""
        try:
            job = job if job is not None else Job.from_text(body)
        except JobValidationError as exc:
            raise InvalidProtocolError("; ".join(str(p) for p in exc.problems), extra=exc.to_dict()) from None
        too_big = [f"the job has {job.total_tasks} tasks; the local cluster takes at most {MAX_TASKS} per job"
                   ] if job.total_tasks > MAX_TASKS else []
        too_big += port_problems(job, admin) + name_problems(user, job)
        too_big += [f"task role {r.name} asks for {n} ports per task; at most {MAX_PORTS_PER_TASK}"
                    for r in job.task_roles if (n := sum(p.count for p in r.ports)) > MAX_PORTS_PER_TASK]
        if too_big:
            raise InvalidProtocolError("; ".join(too_big))
        estimator = job.extras.get(ESTIMATOR_KEY)
        if isinstance(estimator, dict):
            if not admin and (estimator.get("sourceDir") or any(
                    not is_remote(u) for u in (estimator.get("inputs") or {}).values())):
                raise ForbiddenUserError("only the cluster's owner may give host paths (sourceDir, inputs)")
            missing = estimator_problems(estimator)
            if missing:
                raise InvalidProtocolError("; ".join(missing))
        demands = [Resources(r.cpu, r.memory_mb, r.gpu) for r in job.task_roles for _ in range(r.instances)]
        reason = self.capacity.never_fits(job.virtual_cluster, demands, job.gang_allocation)
        if reason:
            raise InsufficientResourceError(f"job {job.name} can never run here: {reason}")
        short = self.space.short()
        if short:
            raise InsufficientStorageError(f"job {job.name} was not submitted: {short}")
        now = now_ms()
        try:
            with self.store.tx():
                job_id = self.store.insert_job(
                    user, job.name, vc=job.virtual_cluster, now=now, total_gpu=sum(d.gpu for d in demands),
                    total_tasks=len(demands), total_roles=len(job.task_roles), config_format=job.source_format,
                    config_text=job.source_text if job.source_text is not None else body.decode("utf-8-sig"),
                    model=job.model_dump_json())
                self._new_attempt(job_id, 0, job)
                self.store.add_event(job_id, "Normal", "Submitted", f"job submitted by {user} ({job.source_format})")
                if isinstance(estimator, dict):
                    Layout(self.job_dir(user, job.name) / "ml", estimator).create()
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
        self._jobs[job_id] = job
        self.queue.add(job.virtual_cluster, now, job_id)
        self.schedule()
        return {"status": 202, "message": f"job {user}~{job.name} submitted", "name": job.name, "username": user}

    def _new_attempt(self, job_id: int, attempt: int, job: Job) -> None:
        self.store.insert_attempt(job_id, attempt, [(r.name, i, r.cpu, r.memory_mb, r.gpu)
                                                    for r in job.task_roles for i in range(r.instances)])

    # ---- scheduling ----------------------------------------------------------------------------------------------
    def schedule(self) -> None:
        """Start what fits, FIFO by submission time within each virtual cluster. Only queue heads are looked
        at: the first job that does not fit blocks its VC (no overtaking) and records why it waits."""
        for vc, entries in self.queue.by_vc.items():
            while entries:
                job_id = entries[0][1]
                row = self.store.job_core(job_id)
                waiting = (self.store.waiting_tasks(job_id, row["attempt"]) if row and row["execution_type"] == "START"
                           and row["state"] in LIVE_JOB else [])
                if row is None or not waiting:
                    entries.pop(0)
                    continue
                job = self.job_model(row)
                room = self.capacity.room(vc)
                if job.gang_allocation:
                    short = sum((_demand(t) for t in waiting), Resources()).shortfall(room)
                    fits = [] if short else waiting
                else:
                    fits, short, left = [], None, room
                    for t in waiting:
                        short = _demand(t).shortfall(left)
                        if short:
                            break
                        fits.append(t)
                        left = left - _demand(t)
                if fits:
                    self._launch(row, job, fits)
                if short:
                    self._set_waiting(row, short)
                    break
                if entries and entries[0][1] == job_id:  # a task that failed to start may have ended the job
                    entries.pop(0)                        # and a nested schedule() removed it already

    def waiting_reason(self, row: dict[str, Any]) -> str | None:
        """Why a job waits: its shortfall at the head of the queue, else how many jobs are ahead of it."""
        ahead = self.queue.position(row["vc"], row["submission_time"], row["id"])
        if ahead is None or row["execution_type"] != "START":
            return None
        if ahead:
            return f"{ahead} job{'s' * (ahead != 1)} ahead in virtual cluster {row['vc']!r}"
        return row["waiting_reason"]

    def _set_waiting(self, row: dict[str, Any], reason: str) -> None:
        if row.get("waiting_reason") != reason:
            self.store.update_job(row["id"], waiting_reason=reason)
            row["waiting_reason"] = reason

    def _placements(self, row: dict[str, Any], job: Job) -> dict[tuple[str, int], Placement]:
        """Ports for every task of the attempt (allocated on first launch so each task's env can name them)."""
        tasks = self.store.tasks(row["id"], row["attempt"])
        out = {}
        planned = services.planned(job)
        with self.store.tx():
            for t in tasks:
                ports = loads(t["ports"])
                if ports is None:
                    role = job.role(t["role"])
                    ports = {p.label: self.ports.allocate(p.count, p.begin_at) for p in role.ports}
                    mine = {}
                    for name, params in planned.get((t["role"], t["idx"]), {}).items():
                        ports[name] = self.ports.allocate(1)
                        mine[name] = {"port": ports[name][0], "parameters": params,
                                      # only the proxy and the task hold it; sshd takes keys, no token
                                      "token": None if name == "ssh" else services.new_token(),
                                      "basePath": services.base_path(row["user"], row["name"], t["role"], t["idx"],
                                                                     name)}
                    self.store.update_task(t, ports=dumps(ports), host_ip=HOST_IP,
                                           services=dumps(mine) if mine else None)
                out[(t["role"], t["idx"])] = Placement(HOST_IP, ports, loads(t["gpus"], []))
        return out

    def _launch(self, row: dict[str, Any], job: Job, tasks: list[dict[str, Any]]) -> None:
        now = now_ms()
        with self.store.tx():
            for t in tasks:
                gpus = self.capacity.take(row["vc"], _demand(t))
                td = self.task_dir(row, t["attempt"], t["role"], t["idx"], t["task_attempt"])
                self.store.update_task(t, state="STARTING", gpus=dumps(gpus), task_dir=str(td),
                                       runtime=self.runtime.name, launched_time=now)
            if row["state"] == "WAITING":
                deadline = (time.time() + job.max_run_time_minutes * 60) if job.max_run_time_minutes else None
                self.store.update_job(row["id"], state="RUNNING", sub_state="AttemptRunning", waiting_reason=None,
                                      launched_time=row["launched_time"] or now, deadline=deadline)
                self.store.update_attempt(row["id"], row["attempt"], state="RUNNING", launched_time=now)
                row["state"] = "RUNNING"
            placements = self._placements(row, job)
            fresh = {(x["role"], x["idx"]): x for x in self.store.tasks(row["id"], row["attempt"])}
        for t in tasks:
            t.update(services=fresh[(t["role"], t["idx"])]["services"], ports=fresh[(t["role"], t["idx"])]["ports"])
            self._start_task(row, job, t, placements)

    def _start_task(self, row: dict[str, Any], job: Job, t: dict[str, Any],
                    placements: dict[tuple[str, int], Placement]) -> None:
        """Start the task here when the runtime can do it in a few file operations (a warm shim), else in a
        worker thread: a fork/exec or a Docker create must not hold up the event loop. Either way ``_started``
        records the outcome from a later turn of the loop."""
        try:
            spec = task_spec(row, job, t, placements, docker=self.runtime.in_container,
                             home=self.user_home(row["user"]), layout=self.layout(row, job),
                             host_paths=self.is_admin(row["user"]))
            spec.run_as = self.accounts.run_as(row["user"])
            if spec.run_as is not None:  # the task's account owns its job's directories, its HOME is its own
                spec.env.setdefault("HOME", spec.env.get("PAI_USER_HOME", ""))
                prepare_task_dir(spec)
                self.accounts.give(spec.task_dir.parent, spec.run_as)
                if (spec.task_dir.parent / "ml").is_dir():
                    self.accounts.give(spec.task_dir.parent / "ml", spec.run_as, tree=True)
        except Exception as exc:  # e.g. the task dir cannot be written
            log.exception("preparing %s failed", t)
            self._task_ended(row["id"], t, TaskExit(exit_code=255, diagnostics=f"the task could not start: {exc}"),
                             None)
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
                future = self.spawner.submit(self.runtime.start, spec)
                future.add_done_callback(lambda f: loop.call_soon_threadsafe(self._started_safely, row["id"], t, f))
                return
            quick.set_result(handle)
        loop.call_soon(self._started_safely, row["id"], t, quick)

    def _started_safely(self, job_id: int, t: dict[str, Any], future: Future[TaskHandle]) -> None:
        self.space.with_room(lambda: self._started(job_id, t, future))

    def _started(self, job_id: int, t: dict[str, Any], future: Future[TaskHandle]) -> None:
        exc = future.exception()
        if exc is not None:
            if not isinstance(exc, TaskStartError):
                log.error("starting %s failed: %r", t, exc)
            result = (TaskExit(exit_code=exc.exit_code, diagnostics=exc.diagnostics) if isinstance(exc, TaskStartError)
                      else TaskExit(exit_code=255, diagnostics=f"the task could not start: {exc}"))
            self._task_ended(job_id, t, result, None)
            return
        handle = future.result()
        current = self.store.task(job_id, t["attempt"], t["role"], t["idx"])
        with self.store.tx():
            if current is not None and current["task_attempt"] == t["task_attempt"]:
                self.store.update_task(t, state="RUNNING", handle=dumps(handle.to_dict()))
                self.store.add_event(job_id, "Normal", "TaskStarted",
                                     f"{t['role']}[{t['idx']}] started on the {self.runtime.name} runtime",
                                     t["role"], t["idx"])
        self.watch(job_id, t, handle)
        if current is None or current["stopping"]:  # stopped (or deleted) while it was starting
            self.runtime.stop(handle, self.stop_grace)

    def watch(self, job_id: int, t: dict[str, Any], handle: TaskHandle) -> None:
        """Wait for the started task ``t`` in the background and record its end (recovery re-attaches with it)."""
        key = (job_id, t["attempt"], t["role"], t["idx"])

        async def watch() -> None:
            try:
                result = await self.runtime.wait(handle, Path(t["task_dir"]))
            except Exception as exc:
                log.exception("waiting for %s failed", key)
                result = TaskExit(exit_code=255, diagnostics=f"lost track of the task: {exc}")
            self.watchers.pop(key, None)
            self.space.with_room(lambda: self._task_ended(job_id, t, result, handle))  # even on a full disk

        self.watchers[key] = asyncio.ensure_future(watch())

    # ---- completion ----------------------------------------------------------------------------------------------
    def _task_ended(self, job_id: int, t: dict[str, Any], result: TaskExit, handle: TaskHandle | None) -> None:
        row = self.store.job_core(job_id)
        current = self.store.task(job_id, t["attempt"], t["role"], t["idx"]) if row else None
        if row is None or current is None or current["task_attempt"] != t["task_attempt"]:
            if handle is not None and row is None:  # the job was deleted meanwhile
                self.runtime.remove(handle)
            return
        job = self.job_model(row)
        was_active = current["state"] in ACTIVE_TASK
        diag = result.diagnostics
        if result.oom and "memory" not in diag:
            diag = f"out of memory: the task used more than its {current['memory_mb']} MB. {diag}".strip()
        stopped = bool(current["stopping"]) or row["attempt"] != t["attempt"] or row["state"] in FINAL
        state = "STOPPED" if stopped else ("SUCCEEDED" if result.exit_code == 0 else "FAILED")
        keep = state == "FAILED" and job.parameters.get("isDebug") is True
        if handle is not None and not keep:
            try:
                self.runtime.remove(handle)
            except Exception:
                log.exception("removing %s failed", handle.id)
        role = job.role(t["role"])
        with self.store.tx():
            self.store.update_task(current, state=state, exit_code=result.exit_code, exit_diagnostics=diag,
                                   completed_time=now_ms())
            self.store.add_event(job_id, "Normal" if state == "SUCCEEDED" else "Warning", f"Task{state.title()}",
                                 f"{t['role']}[{t['idx']}] exited with code {result.exit_code}"
                                 + (f": {diag}" if diag else "") + (" (kept for debugging)" if keep else ""),
                                 t["role"], t["idx"])
            if row["state"] == "STOPPING":
                self._maybe_stopped(row)
            elif not stopped and row["state"] == "RUNNING":
                if (state == "FAILED" and not job.gang_allocation
                        and current["task_attempt"] < role.task_retry_count):
                    self._retry_task(row, current)
                else:
                    self._apply_completion(row, job)
        if was_active:  # only once it is recorded (a full disk may make us try twice)
            self.capacity.give_back(row["vc"], _demand(current), loads(current["gpus"], []))
        self.schedule()

    def _retry_task(self, row: dict[str, Any], task: dict[str, Any]) -> None:
        self.store.update_task(task, state="WAITING", task_attempt=task["task_attempt"] + 1, handle=None,
                               exit_code=None, exit_diagnostics=None, completed_time=None, launched_time=None)
        self.store.add_event(row["id"], "Warning", "TaskRetry", f"{task['role']}[{task['idx']}] failed; retrying "
                             f"(task attempt {task['task_attempt']})", task["role"], task["idx"])
        self.queue.add(row["vc"], row["submission_time"], row["id"])

    def _apply_completion(self, row: dict[str, Any], job: Job) -> None:
        decision = completion.decide(job, self.store.tasks(row["id"], row["attempt"]))
        if decision is not None:
            self._finish_attempt(row, job, decision.state, decision.trigger, decision.exit_code, decision.message)

    def _finish_attempt(self, row: dict[str, Any], job: Job, state: str, trigger: dict[str, Any] | None,
                        exit_code: int | None, diagnostics: str) -> None:
        now = now_ms()
        self.store.update_attempt(row["id"], row["attempt"], state=state, completed_time=now, exit_code=exit_code,
                                  exit_diagnostics=diagnostics, trigger_role=trigger and trigger["role"],
                                  trigger_index=trigger and trigger["idx"])
        self._stop_remaining(row)
        self._release_ports(row)
        if state == "FAILED" and row["retries"] < job.retry_count:
            attempt = row["attempt"] + 1
            self._new_attempt(row["id"], attempt, job)
            self.queue.add(row["vc"], row["submission_time"], row["id"])
            self.store.update_job(row["id"], state="WAITING", sub_state="AttemptCreationPending", attempt=attempt,
                                  retries=row["retries"] + 1, exit_code=exit_code, exit_diagnostics=diagnostics)
            self.store.add_event(row["id"], "Warning", "JobRetry", f"attempt {row['attempt']} failed: {diagnostics}; "
                                 f"starting attempt {attempt} (retry {row['retries'] + 1} of {job.retry_count})")
            return
        self.store.update_job(row["id"], state=state, sub_state="Completed", completed_time=now, exit_code=exit_code,
                              exit_diagnostics=diagnostics, trigger_role=trigger and trigger["role"],
                              trigger_index=trigger and trigger["idx"], waiting_reason=None, deadline=None)
        self.store.add_event(row["id"], "Normal" if state == "SUCCEEDED" else "Warning", f"Job{state.title()}",
                             diagnostics)
        row["state"] = state

    def _stop_remaining(self, row: dict[str, Any]) -> None:
        for t in self.store.tasks(row["id"], row["attempt"]):
            if t["state"] == "WAITING":
                self.store.update_task(t, state="STOPPED", completed_time=now_ms(),
                                       exit_diagnostics="not started: the job attempt ended")
            elif t["state"] in ACTIVE_TASK and not t["stopping"]:
                self.store.update_task(t, stopping=1)
                if t["handle"]:
                    self.runtime.stop(TaskHandle.from_dict(loads(t["handle"])), self.stop_grace)

    def _release_ports(self, row: dict[str, Any]) -> None:
        for t in self.store.tasks(row["id"], row["attempt"]):
            for ports in (loads(t["ports"]) or {}).values():
                self.ports.release(ports)

    # ---- stop, delete, time limits -------------------------------------------------------------------------------
    def stop(self, row: dict[str, Any], reason: str) -> None:
        """Stop the job (on a full disk too: see space.py)."""
        self.space.with_room(lambda: self._stop(row, reason))

    def _stop(self, row: dict[str, Any], reason: str) -> None:
        if row["state"] in FINAL or row["execution_type"] == "STOP":
            return
        with self.store.tx():
            self.store.update_job(row["id"], execution_type="STOP", state="STOPPING", exit_diagnostics=reason)
            self.store.add_event(row["id"], "Normal", "StopRequested", reason)
            row.update(execution_type="STOP", state="STOPPING", exit_diagnostics=reason)
            self._stop_remaining(row)
            self._maybe_stopped(row)
        self.schedule()

    def resume_stop(self, row: dict[str, Any]) -> None:
        """Carry on the stop of a STOPPING job (one in flight when the daemon went down): stop what still runs,
        and end the job once nothing does."""
        with self.store.tx():
            self._stop_remaining(row)
            self._maybe_stopped(row)

    def _maybe_stopped(self, row: dict[str, Any]) -> None:
        if any(t["state"] in ACTIVE_TASK for t in self.store.tasks(row["id"], row["attempt"])):
            return
        now = now_ms()
        self._release_ports(row)
        self.store.update_attempt(row["id"], row["attempt"], state="STOPPED", completed_time=now)
        self.store.update_job(row["id"], state="STOPPED", sub_state="Completed", completed_time=now,
                              waiting_reason=None, deadline=None)
        self.store.add_event(row["id"], "Normal", "JobStopped", row.get("exit_diagnostics") or "stopped")
        row["state"] = "STOPPED"

    def check_deadlines(self) -> None:
        now = time.time()
        for row in self.store.overdue_jobs(now):
            minutes = self.job_model(row).max_run_time_minutes
            self.stop(row, f"stopped: the job ran longer than its max run time of {minutes:g} minutes "
                           f"(extras.maxRunTimeMinutes)")

    def delete(self, row: dict[str, Any]) -> None:
        """Delete a finished job and its files (on a full disk too: that is how space comes back)."""
        self.space.with_room(lambda: self._delete(row))

    def _delete(self, row: dict[str, Any]) -> None:
        if row["state"] not in FINAL:
            raise JobNotFinishedError(f"job {row['user']}~{row['name']} is {row['state']}; stop it before deleting")
        for t in self.store.tasks(row["id"]):
            if t["handle"] and t["state"] == "FAILED":
                try:
                    self.runtime.remove(TaskHandle.from_dict(loads(t["handle"])))
                except Exception:
                    log.exception("removing a kept task of %s failed", row["name"])
        with self.store.tx():
            self.store.delete_job(row["id"])
        self.forget_model(row["id"])
        shutil.rmtree(self.job_dir(row["user"], row["name"]), ignore_errors=True)

    # ---- recovery ------------------------------------------------------------------------------------------------
    def recover(self) -> None:
        """Re-attach to tasks that were running when the daemon stopped; collect those that ended meanwhile."""
        recovery.recover(self)
