"""How tasks and jobs end: a task's exit recorded (a retry of the task or of the job, or the attempt's
outcome from ``completion``), stop (asked for, or past the max run time) and delete. ``Ending`` works on the
shared ``ClusterState`` and is handed ``schedule`` (room may be free after each of these); the launcher is
handed ``Ending.task_ended`` in turn (``Cluster``, service.py, wires the two)."""

from __future__ import annotations

import logging
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from ...common.states import ACTIVE_TASK, FINAL
from ...protocol import Job
from ...protocol.rules import MAX_RUN_TIME_KEY, minutes_text
from ..runtime.base import TaskExit, TaskHandle
from ..runtime.taskdir import add_notice
from ..task.logs import last_line
from . import completion
from .errors import JobNotFinishedError
from .sharing import is_interactive
from .state import PREEMPTED, ClusterState, demand
from .store import JobCore, TaskRow, loads, now_ms

log = logging.getLogger("pai_jupyter.cluster")
DELETION_PENDING = "AttemptDeletionPending"
"""OpenPAI's sub-state of a job whose attempt has its outcome and whose tasks are being stopped (shown RUNNING)."""
STOP_REQUESTED = -210
"""The exit code of a stopped job and its attempt, with the stop's reason as its diagnostics: OpenPAI's
FrameworkController completes a framework it was asked to stop with StopFrameworkRequested (its exit spec table)."""


class Ending:
    """Every way a task or job ends, recorded in one transaction each, then ``schedule`` (room may be free)."""

    def __init__(self, state: ClusterState, schedule: Callable[[], None]) -> None:
        self.state = state
        self.schedule = schedule
        # the shared objects every path uses, by their short names (ClusterState never replaces them)
        self.store, self.runtime, self.queue = state.store, state.runtime, state.queue
        self.launch = state.launch

    # ---- completion ----------------------------------------------------------------------------------------------
    def task_ended(self, job_id: int, t: TaskRow, result: TaskExit, handle: TaskHandle | None) -> None:
        """Record the end of task row ``t`` (``handle`` None: it never started), then what follows from it."""
        row = self.store.job_core(job_id)
        current = self.store.task(job_id, t["attempt"], t["role"], t["idx"]) if row else None
        if row is None or current is None or current["task_attempt"] != t["task_attempt"]:
            if handle is not None and row is None:  # the job was deleted meanwhile
                self.runtime.remove(handle)
            return
        if current["state"] not in ACTIVE_TASK:  # recorded by a call that a full disk failed later on (schedule)
            self.schedule()
            return
        job = self.state.job_model(row)
        diag = result.diagnostics
        if result.oom and "memory" not in diag:
            diag = f"out of memory: the task used more than its {current['memory_mb']} MB. {diag}".strip()
        stopped = bool(current["stopping"]) or row["attempt"] != t["attempt"] or row["state"] in FINAL
        state = "STOPPED" if stopped else ("SUCCEEDED" if result.exit_code == 0 else "FAILED")
        if state == "FAILED" and not diag and current["task_dir"]:  # the command's own words: its log's last line
            line = last_line(self.runtime.logs_dir(Path(current["task_dir"])))
            diag = f"the log's last line: {line}" if line else ""
        keep = state == "FAILED" and job.parameters.get("isDebug") is True
        if handle is not None and not keep:
            try:
                self.runtime.remove(handle)
            except Exception:
                log.exception("removing %s failed", handle.id)
        role = job.role(t["role"])
        held = self.launch.holds(row)  # ended while another scheduler held the job
        with self.store.tx():
            self.store.update_task(
                current, state=state, exit_code=result.exit_code, exit_diagnostics=diag, completed_time=now_ms()
            )
            self.store.add_event(
                job_id,
                "Normal" if state == "SUCCEEDED" else "Warning",
                f"Task{state.title()}",
                f"{t['role']}[{t['idx']}] exited with code {result.exit_code}"
                + (f": {diag}" if diag else "")
                + (" (kept for debugging)" if keep else ""),
                t["role"],
                t["idx"],
            )
            if row["state"] == "STOPPING":
                self._maybe_stopped(row)
            elif row["sub_state"] == DELETION_PENDING:
                self._maybe_completed(row)
            elif not stopped and result.preempted and (row["state"] == "RUNNING" or held):
                self._preempt(row, result.preempted, None)  # its runtime's scheduler preempted it (Slurm's QOS)
            elif not stopped and (row["state"] == "RUNNING" or held):
                if state == "FAILED" and not job.gang_allocation and current["task_attempt"] < role.task_retry_count:
                    self._retry_task(row, current)
                else:
                    self._apply_completion(row, job)
        # only once it is recorded (a full disk may make us try again)
        self.launch.give_back(row["vc"], demand(current), loads(current["gpus"], []))
        self.schedule()

    def _retry_task(self, row: JobCore, task: TaskRow) -> None:
        self.store.update_task(
            task,
            state="WAITING",
            task_attempt=task["task_attempt"] + 1,
            handle=None,
            exit_code=None,
            exit_diagnostics=None,
            completed_time=None,
            launched_time=None,
        )
        self.store.add_event(
            row["id"],
            "Warning",
            "TaskRetry",
            f"{task['role']}[{task['idx']}] failed; retrying (task attempt {task['task_attempt']})",
            task["role"],
            task["idx"],
        )
        self.queue.add(row["vc"], row["submission_time"], row["id"])

    def _apply_completion(self, row: JobCore, job: Job) -> None:
        decision = completion.decide(job, self.store.tasks(row["id"], row["attempt"]))
        if decision is not None:
            self._finish_attempt(row, job, decision.state, decision.trigger, decision.exit_code, decision.message)

    def _finish_attempt(
        self,
        row: JobCore,
        job: Job,
        state: str,
        trigger: TaskRow | None,
        exit_code: int | None,
        diagnostics: str,
        grace_sig: tuple[float, int] | None = None,
    ) -> None:
        """The completion rule (or a preemption) decided the attempt: record the outcome (attempt and job rows, so
        a restarted daemon finishes what this one began), stop what still runs (``grace_sig``: with that grace and
        signal), and end the attempt once none of its tasks is active. Until then the job stays RUNNING in
        sub-state AttemptDeletionPending, as OpenPAI shows a framework whose attempt is being torn down: a client
        that waits for a final job then reads final tasks."""
        trigger_role, trigger_index = (trigger["role"], trigger["idx"]) if trigger else (None, None)
        self.store.update_attempt(
            row["id"],
            row["attempt"],
            state=state,
            exit_code=exit_code,
            exit_diagnostics=diagnostics,
            trigger_role=trigger_role,
            trigger_index=trigger_index,
        )
        decided = {
            "sub_state": DELETION_PENDING,
            "exit_code": exit_code,
            "exit_diagnostics": diagnostics,
            "trigger_role": trigger_role,
            "trigger_index": trigger_index,
            "waiting_reason": None,
            "deadline": None,
        }
        self.store.set_job(row, **decided)
        self.queue.remove(row["id"])
        grace, sig = grace_sig or (None, signal.SIGTERM)
        self._stop_remaining(row, grace, sig)
        self._maybe_completed(row)

    def _maybe_completed(self, row: JobCore) -> None:
        """End a decided attempt whose tasks are all gone: the job takes the attempt's outcome, or (a failed
        attempt with retries left, and no stop asked for) waits for its next attempt at its place in the queue."""
        if any(t["state"] in ACTIVE_TASK for t in self.store.tasks(row["id"], row["attempt"])):
            return
        decided = self.store.attempt(row["id"], row["attempt"])
        assert decided is not None  # every job row has its current attempt's row
        state, diagnostics, now = decided["state"], decided["exit_diagnostics"], now_ms()
        job = self.state.job_model(row)
        self._release_ports(row)
        self.store.update_attempt(row["id"], row["attempt"], completed_time=now)
        if decided["exit_code"] == PREEMPTED:
            if row["execution_type"] == "START":
                self._requeue(row, job, diagnostics or "")
                return
            state = "STOPPED"  # stopped while it was being preempted
        if state == "FAILED" and row["retries"] < job.retry_count and row["execution_type"] == "START":
            retry = (
                f"attempt {row['attempt']} failed: {diagnostics}; "
                f"starting attempt {row['attempt'] + 1} (retry {row['retries'] + 1} of {job.retry_count})"
            )
            self._next_attempt(row, job, ("Warning", "JobRetry", retry), retries=row["retries"] + 1)
            return
        self.store.set_job(row, state=state, sub_state="Completed", completed_time=now)
        self.state.job_changed(row, job, state)
        self.store.add_event(
            row["id"], "Normal" if state == "SUCCEEDED" else "Warning", f"Job{state.title()}", diagnostics or ""
        )

    # ---- preemption ----------------------------------------------------------------------------------------------
    def preempt(self, row: JobCore, reason: str) -> bool:
        """Preempt a running job (core/preempting.py decides which): its tasks get the job's signal and SIGKILL
        after its grace (``extras.preemption``, else the cluster's); then the attempt ends as preempted and the job
        waits again as its next attempt, which resumes from its checkpoint. False when it is not running."""
        if row["state"] != "RUNNING" or row["execution_type"] != "START" or row["sub_state"] == DELETION_PENDING:
            return False
        grace_sig = self.state.sharing.preemption_of(self.state.job_model(row))
        self.state.space.with_room(lambda: self._preempt_tx(row, reason, grace_sig))
        return True

    def _preempt_tx(self, row: JobCore, reason: str, grace_sig: tuple[float, str]) -> None:
        with self.store.tx():
            self._preempt(row, reason, grace_sig)

    def _preempt(self, row: JobCore, reason: str, grace_sig: tuple[float, str] | None) -> None:
        """Record the attempt as preempted (so a restarted daemon carries on: ``resume_completion``), tell and then
        stop its tasks (``grace_sig`` None: they were stopped by the runtime's own scheduler)."""
        told = f"; its tasks get SIG{grace_sig[1]}, SIGKILL {grace_sig[0]:g} s later" if grace_sig else ""
        reason += told
        self.store.add_event(row["id"], "Warning", "JobPreempted", reason)
        job = self.state.job_model(row)
        if grace_sig is not None and is_interactive(job):  # its owner hears of it where they work, too
            self._tell(row, f"[pai_jupyter] {reason}: this session ends then; save your work\n")
        stop = (grace_sig[0], signal.Signals[f"SIG{grace_sig[1]}"].value) if grace_sig else None
        self._finish_attempt(row, job, "FAILED", None, PREEMPTED, reason, stop)

    def _tell(self, row: JobCore, notice: str) -> None:
        """Write ``notice`` into the runtime log of each of the attempt's tasks (a kernel's, a Lab's own log)."""
        for t in self.store.tasks(row["id"], row["attempt"]):
            if t["task_dir"]:
                try:
                    add_notice(Path(t["task_dir"]), notice)
                except OSError as exc:
                    log.warning("could not tell %s of its preemption: %s", t["task_dir"], exc)

    def _requeue(self, row: JobCore, job: Job, diagnostics: str) -> None:
        """A preempted attempt ended: the job waits again at its place in the queue, as its next attempt (its
        retries untouched: being preempted is not a failure; the outcome is the preempted attempt's, there: the
        job's own shows none while it waits and runs again)."""
        told = (
            f"attempt {row['attempt']} was preempted ({diagnostics}); attempt {row['attempt'] + 1} waits in the queue "
            "and resumes from the job's checkpoints ($PAI_CHECKPOINT_DIR)"
        )
        self._next_attempt(row, job, ("Normal", "JobRequeued", told), exit_code=None, exit_diagnostics=None)

    def _next_attempt(self, row: JobCore, job: Job, event: tuple[str, str, str], **fields: object) -> None:
        """The job waits at its place in the queue as its next attempt (a retry, a preemption's requeue); ``fields``:
        what else its row takes."""
        attempt = row["attempt"] + 1
        self.state.new_attempt(row["id"], attempt, job)
        self.queue.add(row["vc"], row["submission_time"], row["id"])
        self.store.set_job(row, state="WAITING", sub_state="AttemptCreationPending", attempt=attempt, **fields)
        self.store.add_event(row["id"], *event)
        self.state.job_changed(row, job, "RETRIED")

    def resume_completion(self, row: JobCore) -> None:
        """Carry on the end of a decided attempt (AttemptDeletionPending when the daemon went down): stop what
        still runs, and end the attempt once nothing does."""
        with self.store.tx():
            self._stop_remaining(row, *self.state.stop_order(row))
            self._maybe_completed(row)

    def _stop_remaining(self, row: JobCore, grace: float | None = None, sig: int = signal.SIGTERM) -> None:
        for t in self.store.tasks(row["id"], row["attempt"]):
            if t["state"] == "WAITING":
                self.store.update_task(
                    t, state="STOPPED", completed_time=now_ms(), exit_diagnostics="not started: the job attempt ended"
                )
            elif t["state"] in ACTIVE_TASK and not t["stopping"]:
                self.store.update_task(t, stopping=1)
                if t["handle"]:
                    handle = TaskHandle.from_dict(loads(t["handle"]))
                    self.runtime.stop(handle, self.state.stop_grace if grace is None else grace, sig)

    def _release_ports(self, row: JobCore) -> None:
        for t in self.store.tasks(row["id"], row["attempt"]):
            for ports in (loads(t["ports"]) or {}).values():
                self.state.ports.release(ports)

    # ---- stop, delete, time limits -------------------------------------------------------------------------------
    def stop(self, row: JobCore, reason: str) -> None:
        """Stop the job (on a full disk too: see space.py)."""
        self.state.space.with_room(lambda: self._stop(row, reason))

    def _stop(self, row: JobCore, reason: str) -> None:
        if row["state"] in FINAL or row["execution_type"] == "STOP":
            return
        if row["sub_state"] == DELETION_PENDING:  # the attempt already has its outcome: keep it, retry no more
            with self.store.tx():
                self.store.update_job(row["id"], execution_type="STOP")
                self.store.add_event(
                    row["id"],
                    "Normal",
                    "StopRequested",
                    f"{reason} (the attempt had already ended: {row['exit_diagnostics']}; its tasks are being stopped)",
                )
            row["execution_type"] = "STOP"
            return
        self.queue.remove(row["id"])
        with self.store.tx():
            self.store.set_job(row, execution_type="STOP", state="STOPPING", exit_diagnostics=reason)
            self.store.add_event(row["id"], "Normal", "StopRequested", reason)
            self._stop_remaining(row)
            self._maybe_stopped(row)
        self.schedule()

    def resume_stop(self, row: JobCore) -> None:
        """Carry on the stop of a STOPPING job (one in flight when the daemon went down): stop what still runs,
        and end the job once nothing does."""
        with self.store.tx():
            self._stop_remaining(row)
            self._maybe_stopped(row)

    def _maybe_stopped(self, row: JobCore) -> None:
        if any(t["state"] in ACTIVE_TASK for t in self.store.tasks(row["id"], row["attempt"])):
            return
        now, reason = now_ms(), row.get("exit_diagnostics") or "stopped"
        self._release_ports(row)
        self.store.update_attempt(
            row["id"],
            row["attempt"],
            state="STOPPED",
            completed_time=now,
            exit_code=STOP_REQUESTED,
            exit_diagnostics=reason,
        )
        self.store.set_job(
            row,
            state="STOPPED",
            sub_state="Completed",
            completed_time=now,
            waiting_reason=None,
            deadline=None,
            exit_code=STOP_REQUESTED,
            exit_diagnostics=reason,
        )
        self.store.add_event(row["id"], "Normal", "JobStopped", reason)
        self.state.job_changed(row, self.state.job_model(row), "STOPPED")

    def check_deadlines(self) -> None:
        now = time.time()
        for row in self.store.overdue_jobs(now):
            minutes = self.state.job_model(row).max_run_time_minutes
            self.stop(
                row,
                f"stopped: the job ran longer than its max run time of {minutes_text(minutes)}"
                f" (extras.{MAX_RUN_TIME_KEY})",
            )

    def delete(self, row: JobCore) -> None:
        """Delete a finished job and its files (on a full disk too: that is how space comes back)."""
        self.state.space.with_room(lambda: self._delete(row))

    def _delete(self, row: JobCore) -> None:
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
        self.state.forget_model(row["id"])
        shutil.rmtree(self.state.job_dir(row["user"], row["name"]), ignore_errors=True)
