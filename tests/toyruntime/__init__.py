"""A third runtime, outside the package: a toy batch system that proves the runtime seam takes a backend with no
core change. It is registered only through the entry point group ``pai_jupyter.runtimes`` (``register``), never
named in pai_jupyter.

It is a batch system (``Batch``): the daemon hands it whole jobs; its scheduler, a thread, places one job at a
time after ``PLACE_S``, runs every task of it as a process group under shim.sh (through the process runtime), and
reports where each runs (node ``toy-node``). While a job waits it tells why and its place in line (``held``).
Its tasks listen on ports of its own range (``ToyPorts``) and see the job's files at host paths (``HostView``).
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pai_jupyter.cluster.runtime.base import (
    Batch,
    Held,
    Runtime,
    TaskExit,
    TaskHandle,
    TaskSample,
    TaskSpec,
    Where,
)
from pai_jupyter.cluster.runtime.ports import PortAllocator
from pai_jupyter.cluster.runtime.process import ProcessRuntime
from pai_jupyter.cluster.runtime.registry import Options
from pai_jupyter.cluster.runtime.shim import SHIM_SH, Shim

NAME = "toy"
NODE = "toy-node"
PLACE_S = 0.3  # how long the toy scheduler holds each job before it places it
LOOK_S = 0.02
ENTRY_POINT = f"{NAME} = tests.toyruntime:make"
PORTS_FROM = 24000  # the toy's port range: a task's ports (unless its job names where they begin) start here


class ToyPorts(PortAllocator):
    """The toy scheduler's own rule for its tasks' ports: free ports from ``PORTS_FROM`` up."""

    def allocate(self, count: int, begin_at: int = 0) -> list[int]:
        return super().allocate(count, begin_at or PORTS_FROM)


class ToyRuntime(Runtime, Batch):
    name = NAME

    def __init__(self) -> None:
        self.inner = ProcessRuntime("watchdog", shim=Shim(("/bin/sh", str(SHIM_SH)), "sh"))
        self._ids = itertools.count(1)
        self._line: list[tuple[str, list[TaskSpec], list[TaskHandle]]] = []  # jobs not placed yet, in order
        self._placed: dict[str, TaskHandle] = {}  # toy task id -> the process runtime's handle
        self._failed: dict[str, TaskExit] = {}  # cancelled before placement, or failed to start
        self._lock = threading.Condition()
        self._closed = False
        threading.Thread(target=self._schedule, name="toy-scheduler", daemon=True).start()

    def ports(self) -> PortAllocator:
        return ToyPorts()

    # ---- the toy scheduler ---------------------------------------------------------------------------------------
    def start_job(self, specs: list[TaskSpec]) -> list[TaskHandle]:
        job = f"toy{next(self._ids)}"
        handles = [TaskHandle(NAME, f"{job}.{i}", {"job": job}) for i in range(len(specs))]
        with self._lock:
            self._line.append((job, specs, handles))
            self._lock.notify_all()
        return handles

    def start(self, spec: TaskSpec) -> TaskHandle:
        return self.start_job([spec])[0]

    def _schedule(self) -> None:
        while True:
            with self._lock:
                while not self._line and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
            time.sleep(PLACE_S)
            with self._lock:
                if not self._line:
                    continue
                _, specs, handles = self._line.pop(0)
            for spec, handle in zip(specs, handles, strict=True):
                if handle.id in self._failed:  # stopped while it was being placed
                    continue
                try:
                    inner = self.inner.start(spec)
                except Exception as exc:
                    with self._lock:
                        self._failed[handle.id] = TaskExit(255, f"the toy scheduler could not start it: {exc}")
                    continue
                with self._lock:
                    self._placed[handle.id] = inner

    def _position(self, handle: TaskHandle) -> int | None:
        with self._lock:
            for ahead, (job, _, _) in enumerate(self._line):
                if job == handle.info.get("job"):
                    return ahead
        return None

    async def running(self, handle: TaskHandle, task_dir: Path, waiting: Callable[[str], None]) -> Where | None:
        while handle.id not in self._placed:
            if handle.id in self._failed:
                return None
            ahead = self._position(handle)
            if ahead is not None:
                waiting(f"the toy scheduler holds it ({ahead} job{'s' * (ahead != 1)} ahead)")
            await asyncio.sleep(LOOK_S)
        return Where(NODE, self.host_ip)

    def held(self, handle: TaskHandle) -> Held | None:
        ahead = self._position(handle)
        return None if ahead is None else Held(ahead, time.time() + (ahead + 1) * PLACE_S)

    # ---- a placed task is a process runtime's task ---------------------------------------------------------------
    async def wait(self, handle: TaskHandle, task_dir: Path) -> TaskExit:
        while handle.id not in self._placed:
            if handle.id in self._failed:
                return self._failed[handle.id]
            await asyncio.sleep(LOOK_S)
        return await self.inner.wait(self._placed[handle.id], task_dir)

    def stop(self, handle: TaskHandle, grace: float = 3.0, sig: int = signal.SIGTERM) -> None:
        with self._lock:
            before = len(self._line)
            self._line = [entry for entry in self._line if entry[0] != handle.info.get("job")]
            if len(self._line) != before or handle.id not in self._placed:
                self._failed.setdefault(handle.id, TaskExit(143, "stopped before the toy scheduler placed it"))
                return
        self.inner.stop(self._placed[handle.id], grace, sig)

    def is_alive(self, handle: TaskHandle) -> bool:
        inner = self._placed.get(handle.id)
        return inner is not None and self.inner.is_alive(inner)

    def remove(self, handle: TaskHandle) -> None:
        inner = self._placed.get(handle.id)
        if inner is not None:
            self.inner.remove(inner)

    def terminal_command(
        self, handle: TaskHandle, env: dict[str, str], cwd: str | None
    ) -> tuple[list[str], dict[str, str], str | None]:
        return self.inner.terminal_command(self._placed[handle.id], env, cwd)

    def sample(self, handle: TaskHandle) -> TaskSample | None:
        inner = self._placed.get(handle.id)
        return None if inner is None else self.inner.sample(inner)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self.inner.close()


def make(options: Options) -> Runtime:
    return ToyRuntime()


def register(site: Path) -> Path:
    """Install the toy's entry point into ``site`` (a directory to put on ``sys.path`` / ``PYTHONPATH``): a
    distribution's metadata naming ``tests.toyruntime:make`` in the group ``pai_jupyter.runtimes``."""
    info = site / "pai_toy_runtime-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pai-toy-runtime\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[pai_jupyter.runtimes]\n{ENTRY_POINT}\n")
    return site
