"""The cluster driven in-process for the unit tests: an in-memory runtime whose tasks end when the test says so
(``MemoryRuntime``), and a ``Harness`` around a ``Cluster`` on it: no daemon, no process, no sleeps."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pai_jupyter.cluster.core.scheduler import Capacity, Resources
from pai_jupyter.cluster.core.service import Cluster
from pai_jupyter.cluster.core.sharing import Sharing
from pai_jupyter.cluster.runtime.base import Runtime, TaskExit, TaskHandle, TaskSample, TaskSpec


class MemoryRuntime(Runtime):
    """Tasks that run until the test ends them: ``end(key, code)``; ``stop`` ends them with 143."""

    name = "memory"

    def __init__(self) -> None:
        self.exits: dict[str, asyncio.Future[TaskExit]] = {}
        self.specs: dict[str, TaskSpec] = {}
        self.stopped: list[str] = []
        self.signals: list[tuple[str, float, int]] = []  # (task, grace, signal) of each stop
        self.ends_on_stop = True  # False: a stopped task runs on until the test ends it (its grace)
        self.removed: list[str] = []

    def start(self, spec: TaskSpec) -> TaskHandle:  # pragma: no cover - start_quick always answers
        raise AssertionError("start_quick answers every start")

    def start_quick(self, spec: TaskSpec) -> TaskHandle:
        self.exits[spec.key] = asyncio.get_running_loop().create_future()
        self.specs[spec.key] = spec
        return TaskHandle(runtime=self.name, id=spec.key, info={})

    async def wait(self, handle: TaskHandle, task_dir: Path) -> TaskExit:
        return await self.exits[handle.id]

    def end(self, key: str, code: int = 0) -> None:
        self.exits[key].set_result(TaskExit(exit_code=code))

    def stop(self, handle: TaskHandle, grace: float = 3.0, sig: int = signal.SIGTERM) -> None:
        self.stopped.append(handle.id)
        self.signals.append((handle.id, grace, sig))
        if self.ends_on_stop and not self.exits[handle.id].done():
            self.exits[handle.id].set_result(TaskExit(exit_code=143, diagnostics="stopped"))

    def is_alive(self, handle: TaskHandle) -> bool:
        return not self.exits[handle.id].done()

    def remove(self, handle: TaskHandle) -> None:
        self.removed.append(handle.id)

    def terminal_command(
        self, handle: TaskHandle, env: dict[str, str], cwd: str | None
    ) -> tuple[list[str], dict[str, str], str | None]:
        raise NotImplementedError

    def sample(self, handle: TaskHandle) -> TaskSample | None:
        return None


def v1(name: str, *, tasks: int = 1, cpu: int = 1, **job: Any) -> bytes:
    role = {"name": "main", "taskNumber": tasks, "cpuNumber": cpu, "memoryMB": 256, "gpuNumber": 0, "command": "true"}
    role.update(job.pop("role", {}))
    return json.dumps({"jobName": name, "image": "img", "taskRoles": [role], **job}).encode()


class Harness:
    def __init__(self, cluster: Cluster, runtime: MemoryRuntime) -> None:
        self.cluster, self.runtime = cluster, runtime

    def submit(self, body: bytes, user: str = "alice") -> str:
        return self.cluster.submit(user, body)["name"]

    def row(self, name: str, user: str = "alice") -> dict[str, Any]:
        return self.cluster.get_job(user, name)

    def state(self, name: str) -> str:
        return self.row(name)["state"]

    def task_states(self, name: str) -> list[str]:
        row = self.row(name)
        return [t["state"] for t in self.cluster.store.tasks(row["id"], row["attempt"])]

    def key(self, name: str, idx: int = 0, attempt: int = 0, task_attempt: int = 0, user: str = "alice") -> str:
        return f"{user}~{name}.a{attempt}.main.{idx}.t{task_attempt}"

    async def settle(self) -> None:
        """Let the loop run the callbacks and watchers queued so far (no wall-clock wait)."""
        for _ in range(10):
            await asyncio.sleep(0)

    async def end(self, name: str, idx: int = 0, code: int = 0, **key: int) -> None:
        await self.settle()
        self.runtime.end(self.key(name, idx, **key), code)
        await self.settle()


MACHINE = Resources(8, 8192, 0)


def run(tmp_path: Path, body: Callable[[Harness], Awaitable[None]], sharing: Sharing | None = None) -> None:
    """``body`` on a cluster of ``MACHINE`` with the memory runtime; without ``sharing``: priority classes and
    FIFO only (no preemption, no fair share: test_preempting.py tests those)."""
    run_on(tmp_path, MACHINE, body, sharing)


def run_on(
    tmp_path: Path,
    machine: Resources,
    body: Callable[[Any], Awaitable[None]],
    sharing: Sharing | None = None,
    runtime: MemoryRuntime | None = None,
    harness: type[Harness] = Harness,
) -> None:
    """``run`` on a ``machine`` of its own; ``runtime`` and ``harness``: a test's own kinds of them."""

    async def main() -> None:
        rt = runtime or MemoryRuntime()
        plain = Sharing(preempt=False, half_life_s=0)
        cluster = Cluster(tmp_path / "local", rt, Capacity(machine), stop_grace=0.0, sharing=sharing or plain)
        try:
            await body(harness(cluster, rt))
        finally:
            cluster.spawner.shutdown(wait=False)
            cluster.store.close()

    asyncio.run(main())
