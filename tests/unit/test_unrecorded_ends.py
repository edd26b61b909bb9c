"""A task's end that could not be recorded: on a full disk the watcher tries again until there is space (it used to
die with "database or disk is full" once the reserve was spent, leaving the job RUNNING with its CPUs held until a
restart), and the daemon's tick re-attaches to an active task whose watcher is gone but whose exit status is on disk
(``Cluster.watch_lost``). In-process, with test_scheduler.py's in-memory runtime: no daemon, no sleeps. On a real
full disk: tests/integration/test_daemon_full_disk.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.cluster.core import space
from pai_jupyter.cluster.runtime.taskdir import EXIT_CODE
from tests.helpers import memory_cluster as ts
from tests.polling import async_wait_for


def _task(h: ts.Harness, name: str) -> dict[str, Any]:
    row = h.row(name)
    return h.cluster.store.tasks(row["id"], row["attempt"])[0]


def _exited(t: dict[str, Any]) -> None:
    """The exit status a shim writes into the task's directory."""
    Path(t["task_dir"]).mkdir(parents=True, exist_ok=True)
    Path(t["task_dir"], EXIT_CODE).write_text("0\n")


def _failing(h: ts.Harness, error: Exception, times: int) -> list[int]:
    """Make the next ``times`` task ends fail with ``error`` (then record them as usual); the calls made."""
    real, calls = h.cluster.launcher.task_ended, []

    def task_ended(*args: Any) -> None:
        calls.append(1)
        if len(calls) <= times:
            raise error
        real(*args)

    h.cluster.launcher.task_ended = task_ended
    return calls


def test_the_tick_records_the_end_of_a_task_whose_watcher_is_gone(tmp_path: Path) -> None:
    async def body(h: ts.Harness) -> None:
        h.submit(ts.v1("lost"))
        h.submit(ts.v1("alive"))
        await h.settle()
        assert h.state("lost") == h.state("alive") == "RUNNING"
        calls = _failing(h, RuntimeError("a bug while recording"), times=1)
        await h.end("lost", 0)
        assert calls == [1] and h.state("lost") == "RUNNING"  # its watcher gave up: the end went unrecorded
        assert h.cluster.watch_lost() == 0  # no exit status on disk yet: it could still be running
        lost, alive = _task(h, "lost"), _task(h, "alive")
        for t in (lost, alive):
            _exited(t)
        assert h.cluster.watch_lost() == 1  # "alive" has its watcher still: left to it
        await h.settle()
        assert h.state("lost") == "SUCCEEDED" and h.state("alive") == "RUNNING"
        assert h.cluster.capacity.used == ts.Resources(1, 256, 0)  # the lost task's CPU came back
        assert h.cluster.watch_lost() == 0

    ts.run(tmp_path, body)


def test_a_full_disk_holds_a_tasks_end_until_there_is_space(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(space, "RETRY_FIRST_S", 0.001, raising=False)

    async def body(h: ts.Harness) -> None:
        h.submit(ts.v1("late"))
        await h.settle()
        calls = _failing(h, sqlite3.OperationalError("database or disk is full"), times=4)
        await h.end("late", 0)
        assert h.state("late") == "RUNNING"
        _exited(_task(h, "late"))
        assert h.cluster.watch_lost() == 0  # its watcher still holds it, trying again

        async def recorded() -> bool:
            return h.state("late") == "SUCCEEDED"

        await async_wait_for(recorded, 10, "the end recorded once writes succeed", interval=0.001)
        assert len(calls) == 5 and not h.cluster.watchers
        assert h.cluster.capacity.used == ts.Resources()

    ts.run(tmp_path, body)


def test_an_end_recorded_before_the_disk_filled_is_not_recorded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task's end is written, then what follows it (the next start) finds the disk full: the end is tried
    again, and must not be recorded twice (a second pass saw the job final and called the task STOPPED)."""
    monkeypatch.setattr(space, "RETRY_FIRST_S", 0.001, raising=False)

    async def body(h: ts.Harness) -> None:
        h.submit(ts.v1("once"))
        await h.settle()
        real, calls = h.cluster.ending.schedule, []

        def schedule() -> None:
            calls.append(1)
            if len(calls) == 1:
                raise sqlite3.OperationalError("database or disk is full")
            real()

        h.cluster.ending.schedule = schedule
        await h.end("once", 0)

        async def done() -> bool:
            return len(calls) > 1

        await async_wait_for(done, 10, "the end tried again", interval=0.001)
        assert h.state("once") == "SUCCEEDED" and h.task_states("once") == ["SUCCEEDED"]
        events = [e["reason"] for e in h.cluster.store.events(h.row("once")["id"])]
        assert events.count("TaskSucceeded") == 1 and "TaskStopped" not in events, events
        assert h.cluster.capacity.used == ts.Resources()

    ts.run(tmp_path, body)
