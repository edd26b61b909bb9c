"""A job whose completion rule has decided (minSucceeded reached, minFailed reached) stays RUNNING, sub-state
``AttemptDeletionPending`` as OpenPAI names it, until the attempt's other tasks are gone; only then is it final
(or, for a failed attempt with retries left, its next attempt made). Driven in-process with an in-memory runtime
whose "stubborn" tasks ignore a stop until the test ends them (a task that traps SIGTERM), as in
test_scheduler.py: no daemon, no sleeps. Behaviour with real processes: tests/integration/test_daemon_completing.py."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pai_jupyter.cluster.core.scheduler import Capacity, Resources
from pai_jupyter.cluster.core.service import Cluster
from pai_jupyter.cluster.core.sharing import Sharing
from pai_jupyter.cluster.http import views
from pai_jupyter.cluster.runtime.base import TaskExit, TaskHandle, TaskSpec, TaskStartError
from pai_jupyter.common.states import FINAL
from tests.helpers import memory_cluster as ts


class StubbornRuntime(ts.MemoryRuntime):
    """``stop`` leaves the tasks named in ``stubborn`` running (they end when the test says so)."""

    def __init__(self) -> None:
        super().__init__()
        self.stubborn: set[str] = set()

    async def wait(self, handle: TaskHandle, task_dir: Path) -> TaskExit:
        return await asyncio.shield(self.exits[handle.id])  # a daemon that goes away leaves its tasks running

    def stop(self, handle: TaskHandle, grace: float = 3.0, sig: int = signal.SIGTERM) -> None:
        if handle.id in self.stubborn:
            self.stopped.append(handle.id)
            return
        super().stop(handle, grace)


def two_roles(name: str, *, worker_code: str = "exit 0", retry_count: int = 0, cpu: int = 1) -> bytes:
    """A ``worker`` whose one success (or failure) decides the job and a ``ps`` that would run on."""
    import json

    roles = [
        {
            "name": "worker",
            "taskNumber": 1,
            "cpuNumber": cpu,
            "memoryMB": 256,
            "gpuNumber": 0,
            "command": worker_code,
            "minSucceededTaskCount": 1,
        },
        {"name": "ps", "taskNumber": 1, "cpuNumber": cpu, "memoryMB": 256, "gpuNumber": 0, "command": "sleep 1d"},
    ]
    return json.dumps({"jobName": name, "image": "img", "retryCount": retry_count, "taskRoles": roles}).encode()


def key(name: str, role: str, attempt: int = 0) -> str:
    return f"alice~{name}.a{attempt}.{role}.0.t0"


class H(ts.Harness):
    runtime: StubbornRuntime

    def tasks(self, name: str, attempt: int | None = None) -> dict[str, dict[str, Any]]:
        row = self.row(name)
        found = self.cluster.store.tasks(row["id"], row["attempt"] if attempt is None else attempt)
        return {t["role"]: t for t in found}

    def detail(self, name: str) -> dict[str, Any]:
        row = self.row(name)
        return views.detail(
            row,
            self.cluster.store.list_item(row["id"]),
            self.cluster.store.tasks(row["id"], row["attempt"]),
            ["worker", "ps"],
            self.cluster.waiting_reason(row),
        )

    async def finish(self, k: str, code: int) -> None:
        await self.settle()
        self.runtime.end(k, code)
        await self.settle()

    def assert_consistent(self, name: str) -> None:
        """A job that reads final has no task that does not."""
        row = self.row(name)
        if row["state"] in FINAL:
            assert all(t["state"] in FINAL for t in self.cluster.store.tasks(row["id"])), self.tasks(name)


def run(tmp_path: Path, body: Callable[[H], Awaitable[None]]) -> None:
    ts.run_on(tmp_path, ts.MACHINE, body, Sharing(), StubbornRuntime(), H)  # the default sharing, as a daemon has


def test_a_succeeded_decision_waits_for_the_task_that_ignores_its_stop(tmp_path: Path) -> None:
    async def body(h: H) -> None:
        h.submit(two_roles("early"))
        await h.settle()
        h.runtime.stubborn.add(key("early", "ps"))
        await h.finish(key("early", "worker"), 0)
        row = h.row("early")
        assert (row["state"], row["sub_state"]) == ("RUNNING", "AttemptDeletionPending")
        assert row["completed_time"] is None and h.runtime.stopped == [key("early", "ps")]
        ps = h.tasks("early")["ps"]
        assert (ps["state"], ps["stopping"]) == ("RUNNING", 1)
        assert h.cluster.capacity.used == Resources(1, 256, 0)  # the ps still holds what it took
        d = h.detail("early")["jobStatus"]
        assert (d["state"], d["subState"], d["attemptState"]) == ("RUNNING", "AttemptDeletionPending", "RUNNING")
        assert d["appExitTriggerTaskRoleName"] == "worker" and "worker reached 1" in d["appExitDiagnostics"]
        assert d["waitingReason"] is None
        attempt = h.cluster.store.attempt(row["id"], 0)
        assert attempt is not None and views.attempt_item(row, attempt, [])["state"] == "RUNNING"
        assert not [e for e in h.cluster.store.events(row["id"]) if e["reason"] == "JobSucceeded"]

        await h.finish(key("early", "ps"), 143)
        row = h.row("early")
        assert (row["state"], row["sub_state"], row["exit_code"]) == ("SUCCEEDED", "Completed", 0)
        assert {r: t["state"] for r, t in h.tasks("early").items()} == {"worker": "SUCCEEDED", "ps": "STOPPED"}
        assert h.tasks("early")["ps"]["exit_code"] == 143
        assert row["completed_time"] >= h.tasks("early")["ps"]["completed_time"]
        reasons = [e["reason"] for e in h.cluster.store.events(row["id"])]
        assert reasons.index("TaskStopped") < reasons.index("JobSucceeded") == len(reasons) - 1
        attempt = h.cluster.store.attempt(row["id"], 0)
        assert attempt is not None and (attempt["state"], attempt["exit_code"]) == ("SUCCEEDED", 0)
        assert attempt["completed_time"] == row["completed_time"]
        assert h.cluster.capacity.used == Resources() and not h.cluster.ports.held

    run(tmp_path, body)


def test_a_decision_with_nothing_left_running_is_final_at_once(tmp_path: Path) -> None:
    async def body(h: H) -> None:
        h.submit(two_roles("quick"))
        await h.finish(key("quick", "worker"), 0)  # the ps is stopped and ends at once
        assert h.state("quick") == "SUCCEEDED"
        h.assert_consistent("quick")
        h.submit(ts.v1("one"))
        await h.end("one", code=4)
        row = h.row("one")
        assert (row["state"], row["sub_state"], row["exit_code"]) == ("FAILED", "Completed", 4)

    run(tmp_path, body)


def test_a_failed_attempt_is_retried_only_once_its_tasks_are_gone(tmp_path: Path) -> None:
    async def body(h: H) -> None:
        h.submit(two_roles("retry", worker_code="exit 3", retry_count=1, cpu=4))
        h.submit(ts.v1("after", cpu=8))  # would fit in what the retry's tasks free, if they were gone
        await h.settle()
        h.runtime.stubborn.add(key("retry", "ps"))
        await h.finish(key("retry", "worker"), 3)
        row = h.row("retry")
        assert (row["state"], row["sub_state"], row["attempt"], row["retries"]) == (
            "RUNNING",
            "AttemptDeletionPending",
            0,
            0,
        )
        assert h.detail("retry")["jobStatus"]["retries"] == 0
        assert (row["exit_code"], row["trigger_role"]) == (3, "worker")
        assert h.cluster.store.attempts(row["id"])[0]["attempt"] == 0  # no new attempt yet
        assert h.state("after") == "WAITING" and h.cluster.capacity.used == Resources(4, 256, 0)
        assert not [k for k in h.runtime.specs if ".a1." in k]

        await h.finish(key("retry", "ps"), 143)
        row = h.row("retry")
        assert (row["state"], row["attempt"], row["retries"]) == ("RUNNING", 1, 1)  # ahead of 'after' again
        assert h.detail("retry")["jobStatus"]["retries"] == 1
        old = {t["role"]: t for t in h.cluster.store.tasks(row["id"], 0)}
        assert {r: t["state"] for r, t in old.items()} == {"worker": "FAILED", "ps": "STOPPED"}
        new = h.tasks("retry")
        assert all(t["state"] == "RUNNING" for t in new.values())
        assert min(t["launched_time"] for t in new.values()) >= old["ps"]["completed_time"]
        assert [(a["attempt"], a["state"]) for a in h.cluster.store.attempts(row["id"])] == [
            (1, "RUNNING"),
            (0, "FAILED"),
        ]
        reasons = [e["reason"] for e in h.cluster.store.events(row["id"])]
        assert reasons.index("TaskStopped") < reasons.index("JobRetry")
        assert h.state("after") == "WAITING"

        h.runtime.stubborn.add(key("retry", "ps", 1))
        await h.finish(key("retry", "worker", 1), 3)
        assert (h.state("retry"), h.row("retry")["retries"]) == ("RUNNING", 1)
        await h.finish(key("retry", "ps", 1), 0)  # it ended on its own after the stop: still a stopped task
        row = h.row("retry")
        assert (row["state"], row["retries"], row["exit_code"]) == ("FAILED", 1, 3)
        assert h.tasks("retry")["ps"]["state"] == "STOPPED"
        h.assert_consistent("retry")
        assert h.state("after") == "RUNNING"

    run(tmp_path, body)


def test_a_stop_while_the_attempt_is_torn_down_keeps_the_outcome_and_skips_the_retry(tmp_path: Path) -> None:
    async def body(h: H) -> None:
        h.submit(two_roles("nomore", worker_code="exit 3", retry_count=2))
        await h.settle()
        h.runtime.stubborn.add(key("nomore", "ps"))
        await h.finish(key("nomore", "worker"), 3)
        h.cluster.stop(h.row("nomore"), "stopped by alice")
        row = h.row("nomore")
        assert (row["state"], row["sub_state"], row["execution_type"]) == ("RUNNING", "AttemptDeletionPending", "STOP")
        await h.finish(key("nomore", "ps"), 143)
        row = h.row("nomore")
        assert (row["state"], row["attempt"], row["retries"], row["exit_code"]) == ("FAILED", 0, 0, 3)
        h.assert_consistent("nomore")
        assert h.cluster.capacity.used == Resources()

    run(tmp_path, body)


def test_a_restart_while_the_attempt_is_torn_down_finishes_it(tmp_path: Path) -> None:
    async def main() -> None:
        runtime = StubbornRuntime()
        first = Cluster(tmp_path / "local", runtime, Capacity(ts.MACHINE), stop_grace=0.0)
        h = H(first, runtime)
        h.submit(two_roles("crash", worker_code="exit 3", retry_count=1))
        await h.settle()
        runtime.stubborn.add(key("crash", "ps"))
        await h.finish(key("crash", "worker"), 3)
        assert h.row("crash")["sub_state"] == "AttemptDeletionPending"
        for watcher in list(first.watchers.values()):  # the daemon goes away; its tasks do not
            watcher.cancel()
        first.spawner.shutdown(wait=False)
        first.store.close()
        runtime.stopped.clear()

        second = Cluster(tmp_path / "local", runtime, Capacity(ts.MACHINE), stop_grace=0.0)
        h = H(second, runtime)
        try:
            second.recover()
            await h.settle()
            row = h.row("crash")
            assert (row["state"], row["sub_state"], row["attempt"]) == ("RUNNING", "AttemptDeletionPending", 0)
            assert runtime.stopped == [key("crash", "ps")]  # asked again to stop
            assert second.capacity.used == Resources(1, 256, 0)
            await h.finish(key("crash", "ps"), 137)
            row = h.row("crash")
            assert (row["state"], row["attempt"], row["retries"]) == ("RUNNING", 1, 1)
            assert {t["state"] for t in h.tasks("crash").values()} == {"RUNNING"}
            assert second.capacity.used == Resources(2, 512, 0)
        finally:
            second.spawner.shutdown(wait=False)
            second.store.close()

    asyncio.run(main())


def test_a_max_run_time_set_while_the_attempt_is_torn_down_is_for_the_next_attempt(tmp_path: Path) -> None:
    from pai_jupyter.cluster.core.maxruntime import set_max_run_time

    async def body(h: H) -> None:
        h.submit(two_roles("later", worker_code="exit 3", retry_count=1))
        await h.settle()
        h.runtime.stubborn.add(key("later", "ps"))
        await h.finish(key("later", "worker"), 3)
        assert set_max_run_time(h.cluster, h.row("later"), 5, "alice")["deadline"] is None
        assert h.row("later")["deadline"] is None  # the watchdog leaves the torn-down attempt (and its retry) alone
        await h.finish(key("later", "ps"), 143)
        row = h.row("later")
        assert (row["state"], row["attempt"]) == ("RUNNING", 1) and row["deadline"] is not None
        assert row["deadline"] - row["launched_time"] / 1000 >= 5 * 60

    run(tmp_path, body)


class HandOverRuntime(ts.MemoryRuntime):
    """The first start goes to a worker thread and never returns (the daemon dies while handing the task over,
    after its handle was written); ``find`` then finds that handle, whose shim is gone without an exit status."""

    def __init__(self) -> None:
        super().__init__()
        self.hanging = threading.Event()
        self.first = True

    def start_quick(self, spec: TaskSpec) -> TaskHandle | None:
        if self.first:
            self.first = False
            return None
        return super().start_quick(spec)

    def start(self, spec: TaskSpec) -> TaskHandle:
        self.hanging.wait(5)
        raise TaskStartError(255, "the daemon went away")

    def find(self, task_dir: str) -> TaskHandle | None:
        return TaskHandle(runtime=self.name, id="handed-over", info={})

    def is_alive(self, handle: TaskHandle) -> bool:
        return False if handle.id == "handed-over" else super().is_alive(handle)


def test_a_task_caught_starting_by_a_crash_runs_again(tmp_path: Path) -> None:
    """A task whose shim never got its command (STARTING at kill -9) is queued again, not failed as lost."""

    async def main() -> None:
        runtime = HandOverRuntime()
        first = Cluster(tmp_path / "local", runtime, Capacity(ts.MACHINE), stop_grace=0.0)
        first.submit("alice", two_roles("handover"))
        await ts.Harness(first, runtime).settle()
        assert {t["state"] for t in first.store.tasks(first.get_job("alice", "handover")["id"])} >= {"STARTING"}
        first.store.close()
        runtime.hanging.set()
        first.spawner.shutdown(wait=False)

        second = Cluster(tmp_path / "local", runtime, Capacity(ts.MACHINE), stop_grace=0.0)
        h = H(second, runtime)
        try:
            second.recover()
            await h.settle()
            assert {t["state"] for t in h.tasks("handover").values()} == {"RUNNING"}, h.tasks("handover")
            for role in ("ps", "worker"):
                await h.finish(key("handover", role), 0)
            assert h.row("handover")["state"] == "SUCCEEDED"
        finally:
            second.spawner.shutdown(wait=False)
            second.store.close()

    asyncio.run(main())
