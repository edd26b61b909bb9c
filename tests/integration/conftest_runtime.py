"""Shared helpers for the runtime tests (imported, not a pytest conftest: the daemon tests own conftest.py)."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

from pai_jupyter.cluster.runtime.base import Runtime, TaskExit, TaskHandle, TaskSpec
from tests.polling import async_wait_for

_seq = itertools.count()


def make_spec(task_dir: Path, script: str, **over: Any) -> TaskSpec:
    """A TaskSpec with a key unique to this test run (cgroup and container names derive from it)."""
    n = next(_seq)
    fields: dict[str, Any] = {
        "key": f"tester~rt{n}.a0.main.0.t0",
        "user": "tester",
        "job_name": f"rt{n}",
        "role": "main",
        "index": 0,
        "job_attempt": 0,
        "task_attempt": 0,
        "script": script,
        "env": {"PAI_TEST": "1"},
        "image": None,
        "cpu": 1,
        "memory_mb": 0,
        "shm_mb": 64,
        "gpus": [],
        "task_dir": task_dir,
    }
    fields.update(over)
    return TaskSpec(**fields)


def wait(runtime: Runtime, handle: TaskHandle, task_dir: Path, timeout: float = 30) -> TaskExit:
    async def go() -> TaskExit:
        return await asyncio.wait_for(runtime.wait(handle, task_dir), timeout)

    return asyncio.run(go())


def stop_when_ready(
    runtime: Runtime, handle: TaskHandle, task_dir: Path, grace: float, end_within: float = 10
) -> tuple[float, TaskExit]:
    """Once the task's command has touched ``ready`` (it has started its children), stop it with ``grace`` s;
    how long the stop took to end it, and its exit. The task is waited on from before the stop, as the daemon does."""

    async def go() -> tuple[float, TaskExit]:
        waiter = asyncio.ensure_future(runtime.wait(handle, task_dir))

        async def ready() -> bool:
            return (task_dir / "ready").exists()

        await async_wait_for(ready, 30, "the command to start its children")
        t0 = time.monotonic()
        runtime.stop(handle, grace)
        result = await asyncio.wait_for(waiter, grace + end_within)
        return time.monotonic() - t0, result

    return asyncio.run(go())


def read(task_dir: Path, name: str) -> str:
    return (task_dir / name).read_text(encoding="utf-8")
