"""A job's start on a full disk: its launch could not be written (the job was taken off its queue first and stayed
WAITING, holding the CPUs it had taken, until a restart), the task's files could not be written (it failed with
255), or its start could not be recorded (the exception left the task STARTING, unwatched, until a restart). Now
the job is queued again, the task starts again, and the start is recorded, each once writes succeed. In-process,
with test_scheduler.py's in-memory runtime; on a real full disk: tests/integration/test_daemon_full_disk.py."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.cluster.core import space
from pai_jupyter.cluster.core.scheduler import Capacity
from pai_jupyter.cluster.core.service import Cluster
from pai_jupyter.cluster.runtime.base import LOCAL_NODE, Batch, TaskExit, TaskHandle, TaskSpec, TaskStartError, Where
from tests.helpers import memory_cluster as ts
from tests.polling import async_wait_for

FULL = "database or disk is full"


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(space, "RETRY_FIRST_S", 0.001)
    monkeypatch.setattr(space, "RETRY_MAX_S", 0.01)


def _failing_writes(h: ts.Harness, times: int, **matching: Any) -> list[dict[str, Any]]:
    """The next ``times`` task writes with these fields fail as SQLite fails on a full disk; the writes tried."""
    real, tried = h.cluster.store.update_task, []

    def update_task(task: Any, **fields: Any) -> None:
        if all(fields.get(k) == v for k, v in matching.items()):
            tried.append(fields)
            if len(tried) <= times:
                raise sqlite3.OperationalError(FULL)
        real(task, **fields)

    h.cluster.store.update_task = update_task  # type: ignore[method-assign,assignment]
    return tried


async def _until(what: str, check: Callable[[], bool]) -> None:
    async def ok() -> bool:
        return check()

    await async_wait_for(ok, 10, what, interval=0.001)


def test_a_job_whose_launch_cannot_be_written_is_queued_again_and_starts_once_it_can(tmp_path: Path) -> None:
    async def body(h: ts.Harness) -> None:
        h.submit(ts.v1("first", cpu=8))
        h.submit(ts.v1("next", cpu=8))
        await h.settle()
        assert h.state("first") == "RUNNING" and h.state("next") == "WAITING"
        tried = _failing_writes(h, 5, state="STARTING")
        await h.end("first", 0)
        assert h.state("first") == "SUCCEEDED"
        assert tried and h.state("next") == "WAITING"  # its launch failed and was rolled back
        assert h.row("next")["id"] in h.cluster.queue.where  # before: off the queue until a restart
        assert h.cluster.capacity.used == ts.Resources()  # what the launch took came back
        await _until("the job to start once its launch is written", lambda: h.task_states("next") == ["RUNNING"])
        assert len(tried) == 6 and h.state("next") == "RUNNING"
        assert h.cluster.capacity.used == ts.Resources(8, 256, 0)
        await h.end("next", 0)
        assert h.state("next") == "SUCCEEDED" and h.cluster.capacity.used == ts.Resources()

    ts.run(tmp_path, body)


def _no_space(times: int, start: Callable[[TaskSpec], TaskHandle]) -> Callable[[TaskSpec], TaskHandle]:
    """``start``, failing its first ``times`` calls as a runtime does when the task's files cannot be written."""
    calls: list[int] = []

    def failing(spec: TaskSpec) -> TaskHandle:
        calls.append(1)
        if len(calls) <= times:
            raise TaskStartError(255, "the task could not start: no space") from OSError(errno.ENOSPC, "No space")
        return start(spec)

    return failing


def test_a_task_whose_files_cannot_be_written_starts_again_instead_of_failing(tmp_path: Path) -> None:
    async def body(h: ts.Harness) -> None:
        h.runtime.start_quick = _no_space(3, h.runtime.start_quick)  # type: ignore[method-assign,assignment]
        h.submit(ts.v1("full"))
        await h.settle()
        assert h.task_states("full") in (["STARTING"], ["RUNNING"])  # before: FAILED with 255
        await _until("the task to start again", lambda: h.task_states("full") == ["RUNNING"])
        await h.end("full", 0)
        assert h.state("full") == "SUCCEEDED"
        assert h.cluster.capacity.used == ts.Resources()

    ts.run(tmp_path, body)


def test_a_job_stopped_while_its_task_waits_for_room_stops(tmp_path: Path) -> None:
    async def body(h: ts.Harness) -> None:
        h.runtime.start_quick = _no_space(10**6, h.runtime.start_quick)  # type: ignore[method-assign,assignment]
        h.submit(ts.v1("never"))
        await h.settle()
        h.cluster.stop(h.row("never"), "stopped by its owner")
        await _until("the job to stop", lambda: h.state("never") == "STOPPED")
        assert h.task_states("never") == ["STOPPED"] and h.cluster.capacity.used == ts.Resources()

    ts.run(tmp_path, body)


def test_a_start_that_cannot_be_recorded_is_recorded_once_it_can(tmp_path: Path) -> None:
    async def body(h: ts.Harness) -> None:
        tried = _failing_writes(h, 4, state="RUNNING")
        h.submit(ts.v1("unrecorded"))
        await h.settle()
        assert tried  # the task runs; its start is not written yet (before: never, the callback raised)
        await _until("the start to be recorded", lambda: h.task_states("unrecorded") == ["RUNNING"])
        await h.end("unrecorded", 0)
        assert h.state("unrecorded") == "SUCCEEDED" and h.cluster.capacity.used == ts.Resources()

    ts.run(tmp_path, body)


class GangMemory(ts.MemoryRuntime, Batch):
    """The in-memory runtime as a batch system's: all tasks of a job in one call (``start_job``, in a thread)."""

    def __init__(self, full: int) -> None:
        super().__init__()
        self.full, self.calls = full, 0

    def start_job(self, specs: list[TaskSpec]) -> list[TaskHandle]:
        self.calls += 1
        if self.calls <= self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return [TaskHandle(runtime=self.name, id=spec.key, info={}) for spec in specs]

    async def running(self, handle: TaskHandle, task_dir: Path, waiting: Callable[[str], None]) -> Where | None:
        return Where(LOCAL_NODE, self.host_ip)  # placed at once

    async def wait(self, handle: TaskHandle, task_dir: Path) -> TaskExit:
        future = self.exits.setdefault(handle.id, asyncio.get_running_loop().create_future())
        return await future


def run_gang(tmp_path: Path, full: int, body: Callable[[ts.Harness], Awaitable[None]]) -> None:
    async def main() -> None:
        runtime = GangMemory(full)
        cluster = Cluster(tmp_path / "local", runtime, Capacity(ts.MACHINE), stop_grace=0.0)
        try:
            await body(ts.Harness(cluster, runtime))
        finally:
            cluster.spawner.shutdown(wait=False)
            cluster.store.close()

    asyncio.run(main())


def test_a_batch_systems_job_is_submitted_again_whole(tmp_path: Path) -> None:
    async def body(h: ts.Harness) -> None:
        h.submit(ts.v1("gang", tasks=2))
        runtime = h.runtime
        assert isinstance(runtime, GangMemory)
        await _until("the job to be submitted once there is room", lambda: runtime.calls == 3 and runtime.exits != {})
        await _until("its tasks to run", lambda: h.task_states("gang") == ["RUNNING", "RUNNING"])
        assert sorted(runtime.exits) == [h.key("gang", 0), h.key("gang", 1)]  # one call with both
        await h.end("gang", 0)
        await h.end("gang", 1)
        assert h.state("gang") == "SUCCEEDED"

    run_gang(tmp_path, 2, body)
