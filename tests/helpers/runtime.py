"""The runtime tests' shared helpers: a TaskSpec of a unique key, waiting on and stopping a task, reading its files;
a runtime of each kind for the semantics tests (``make_runtime``, ``SLURM`` its Slurm parameter); the process
runtime's shims and ``Runtimes``, which removes every task a test started."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.cluster.runtime.base import (
    DEFAULT_PIDS_LIMIT,
    Runtime,
    TaskExit,
    TaskHandle,
    TaskSpec,
)
from pai_jupyter.cluster.runtime.docker import DockerRuntime, docker_available
from pai_jupyter.cluster.runtime.process import ProcessRuntime
from pai_jupyter.cluster.runtime.shim import SHIM_SH, Shim, build_c_shim
from tests.polling import async_wait_for, wait_for

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


TESTS = Path(__file__).parents[1]

BASH_IMAGE, BUSYBOX_IMAGE = "pai-test/bash:latest", "pai-test/busybox:latest"


def make_runtime(kind: str, tmp: Path, request: pytest.FixtureRequest) -> tuple[Runtime, dict[str, object]]:
    if kind == "slurm":  # the real two-node test cluster (tests/slurm/cluster.sh), once for the module
        request.getfixturevalue("slurm_cluster")
        from pai_jupyter.cluster.runtime.slurm import SlurmRuntime

        return SlurmRuntime(), {"env": {"PAI_CURRENT_TASK_ROLE_NAME": "main", "PAI_TASK_INDEX": "0"}}
    if kind == "docker-bash" or kind == "docker-busybox":
        if not docker_available():
            pytest.skip("no Docker engine answers")
        image = BASH_IMAGE if kind == "docker-bash" else BUSYBOX_IMAGE
        script = TESTS / ("make_bash_image.sh" if kind == "docker-bash" else "make_busybox_image.sh")
        done = subprocess.run(["bash", str(script), image], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return DockerRuntime(), {"image": image}
    if kind == "toy":  # a third runtime, from outside the package, found only through its entry point
        from pai_jupyter.cluster.runtime import registry
        from tests.toyruntime import register

        request.getfixturevalue("monkeypatch").syspath_prepend(str(register(tmp / "site")))
        return registry.make("toy", registry.Options()), {}
    if kind == "process-c":
        try:
            return ProcessRuntime(shim=Shim((str(build_c_shim()),), "c")), {}
        except RuntimeError as exc:
            pytest.skip(f"the C shim cannot be built here: {exc}")
    return ProcessRuntime(shim=Shim(("/bin/sh", str(SHIM_SH)), "sh")), {}


SLURM = pytest.param("slurm", marks=pytest.mark.slurm)  # marked: `-m "not slurm"` and the one Slurm worker see it


class Runtimes:
    """Makes ProcessRuntimes and remembers every handle, so a failing test leaves no process or cgroup behind."""

    def __init__(self, shim: Shim, warm: int = 0, warm_dir: Path | None = None) -> None:
        self.shim, self.warm, self.warm_dir = shim, warm, warm_dir
        self.pids_limit = DEFAULT_PIDS_LIMIT
        self.handles: list[tuple[ProcessRuntime, TaskHandle]] = []
        self.made: list[ProcessRuntime] = []

    def make(self, mode: str = "auto") -> ProcessRuntime:
        rt = ProcessRuntime(
            mode, shim=self.shim, warm_shims=self.warm, warm_dir=self.warm_dir, pids_limit=self.pids_limit
        )
        rt.begin()
        self.made.append(rt)
        if rt.warm is not None:  # the tests are about warm starts: have one ready
            wait_for(lambda: rt.warm is not None and rt.warm._ready, 10, "a warm shim")
        start = rt.start

        def tracked(spec):  # type: ignore[no-untyped-def]
            handle = start(spec)
            self.handles.append((rt, handle))
            return handle

        rt.start = tracked  # type: ignore[method-assign]
        return rt

    def cleanup(self) -> None:
        for rt, handle in self.handles:
            if rt.is_alive(handle):
                os.killpg(int(handle.id), signal.SIGKILL)
            rt.remove(handle)
        for rt in self.made:
            rt.close()


def _c_shim() -> Shim:
    try:
        return Shim((str(build_c_shim()),), "c")
    except RuntimeError as exc:  # .ci/run installs gcc; a machine without a compiler runs the sh shim
        pytest.skip(f"the C shim cannot be built here: {exc}")


SHIMS = {"c": _c_shim, "sh": lambda: Shim(("/bin/sh", str(SHIM_SH)), "sh")}
