"""The Docker runtime: one container per task, running shim.sh (bash semantics; sh where the image has no bash).

The task directory (its control part, root's) is bind-mounted read-only at ``TASK_MOUNT``
(``taskdir.IN_CONTAINER``) and its ``run/`` writable below it: the container's shim writes the logs and the exit
status there, so they appear on the host as they are written and stay when the container is gone. The container
(root inside, with only the capabilities of ``dockercaps``) can write only ``run/``, the job's output and the
user's home; the daemon reads what it wrote through ``safeio`` and takes the exit code from the engine. Containers
carry ``pai.*`` labels, which is how a restarted daemon finds them again (``recover``/``find``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest, Mount
from docker.utils import parse_repository_tag

from . import dockercaps, taskdir
from .base import (
    DEFAULT_PIDS_LIMIT,
    EXIT_IMAGE_NOT_FOUND,
    EXIT_LOST,
    EXIT_START_FAILED,
    Runtime,
    TaskExit,
    TaskHandle,
    TaskSample,
    TaskSpec,
    TaskStartError,
)
from .shim import SHIM_SH
from .taskdir import SCRIPT_ENV
from .view import CONTAINER

T = TypeVar("T")
TASK_MOUNT = taskdir.IN_CONTAINER
COMMAND = ["/bin/sh", f"{TASK_MOUNT}/{taskdir.SHIM_COPY}", f"{TASK_MOUNT}/{taskdir.RUN}", *taskdir.OOM_FILES]
ALIVE_STATES = ("running", "paused", "restarting")


def docker_available(timeout: float = 2.0) -> bool:
    """True when a Docker engine answers a ping within ``timeout`` seconds; never raises."""
    try:
        client = docker.from_env(timeout=timeout)
    except Exception:
        return False
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


def _short(exc: BaseException, limit: int = 300) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _in_thread(fn: Callable[[], T]) -> asyncio.Future[T]:
    """Run a blocking call on its own daemon thread (the default executor has only a few workers, and every
    running task has one blocking ``wait`` call in flight)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            fut.set_result(value) if ok else fut.set_exception(value)

    def run() -> None:
        outcome: tuple[bool, Any]
        try:
            outcome = (True, fn())
        except BaseException as exc:
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop may be closed by now
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name="pai-docker-wait", daemon=True).start()
    return fut


class DockerRuntime(Runtime):
    """Runs tasks as containers. ``pull_timeout``: seconds one pull may take; ``pids_limit``: 0: the engine's."""

    name = "docker"
    view = CONTAINER  # its tasks see the job files through mounts, as root (view.py)

    def __init__(
        self,
        client: docker.DockerClient | None = None,
        pull_timeout: float = 60.0,
        pids_limit: int = DEFAULT_PIDS_LIMIT,
    ) -> None:
        self.client = client or docker.from_env(max_pool_size=256)
        self.pull_timeout = pull_timeout
        self.pids_limit = max(0, pids_limit)
        self._stopped: set[str] = set()

    def login_account(self, run_as: tuple[int, int] | None, owner: str) -> str:
        return "root"  # a container's tasks run as root there

    def describe(self) -> str:
        pids = f"at most {self.pids_limit} processes per task" if self.pids_limit else "processes not limited"
        with contextlib.suppress(Exception):
            return f"docker (engine {self.client.version().get('Version', '?')}; {pids})"
        return f"docker ({pids})"

    # ---- start -----------------------------------------------------------------------------------------------
    def start(self, spec: TaskSpec) -> TaskHandle:
        image = spec.image
        if not image:
            raise TaskStartError(EXIT_START_FAILED, "the docker runtime needs an image and the task has none")
        self._ensure_image(image, Path(spec.task_dir))
        td = Path(spec.task_dir).resolve()
        td.mkdir(parents=True, exist_ok=True)
        taskdir.clear_stale(td)
        run = td / taskdir.RUN
        shutil.rmtree(run, ignore_errors=True)  # what an earlier start into this directory left (fd-based: safe)
        run.mkdir(mode=0o700)
        taskdir.write_command(td, spec.disk_script())  # the real one: in the environment
        taskdir.write_copy(td, taskdir.SHIM_COPY, SHIM_SH.read_text())
        # Readable and unique: two daemons on one engine (tests, two homes) may run the same key at once.
        name = f"pai-{re.sub(r'[^a-zA-Z0-9_.-]', '-', spec.key)[:180]}-{secrets.token_hex(3)}"
        kwargs = self._create_args(spec, td, name)
        try:
            container = self.client.containers.create(image, **kwargs)
        except APIError as exc:
            raise TaskStartError(EXIT_START_FAILED, f"the container could not be created: {_short(exc)}") from exc
        info = {"image": image, "name": name, "memory_mb": spec.memory_mb}
        handle = TaskHandle(runtime=self.name, id=container.id, info=info)
        try:  # the handle first: a start the daemon could not record (a full disk) must not run
            taskdir.write_handle(td, handle.to_dict())
            container.start()
        except (APIError, OSError) as exc:
            with contextlib.suppress(DockerException):
                container.remove(force=True)
            reason = _short(exc)
            if spec.gpus and "device driver" in reason:
                reason = (
                    "GPUs were requested but this Docker engine has no NVIDIA runtime "
                    f"(nvidia-container-toolkit): {reason}"
                )
            raise TaskStartError(EXIT_START_FAILED, f"the container could not start: {reason}") from exc
        return handle

    def _create_args(self, spec: TaskSpec, td: Path, name: str) -> dict[str, Any]:
        mounts = [
            Mount(TASK_MOUNT, str(td), type="bind", read_only=True),
            Mount(f"{TASK_MOUNT}/{taskdir.RUN}", str(td / taskdir.RUN), type="bind"),
        ]
        for m in spec.mounts:
            with contextlib.suppress(OSError):  # like `docker run -v`: a missing host directory is made
                Path(m.host_path).mkdir(parents=True, exist_ok=True)
            mounts.append(Mount(m.container_path, str(Path(m.host_path).resolve()), type="bind", read_only=m.read_only))
        labels = {
            "pai.managed": "1",
            "pai.job": f"{spec.user}~{spec.job_name}",
            "pai.user": spec.user,
            "pai.role": spec.role,
            "pai.index": str(spec.index),
            "pai.key": spec.key,
            "pai.attempt": str(spec.job_attempt),
            "pai.task_attempt": str(spec.task_attempt),
            "pai.task_dir": str(td),
        }
        kwargs: dict[str, Any] = {
            "command": COMMAND,
            "name": name,
            "detach": True,
            "network_mode": "host",
            "environment": self._environment(spec),
            "working_dir": spec.work_dir,
            "mounts": mounts,
            "labels": labels,
            **dockercaps.create_args(),  # no capability that reaches the host's network or devices
        }
        if spec.memory_mb > 0:
            kwargs["mem_limit"] = kwargs["memswap_limit"] = f"{spec.memory_mb}m"
        if spec.cpu > 0:
            kwargs["nano_cpus"] = int(spec.cpu * 1e9)
        if spec.shm_mb > 0:
            kwargs["shm_size"] = f"{spec.shm_mb}m"
        if self.pids_limit:
            kwargs["pids_limit"] = self.pids_limit
        if spec.gpus:
            kwargs["device_requests"] = [DeviceRequest(device_ids=[str(g) for g in spec.gpus], capabilities=[["gpu"]])]
        return kwargs

    @staticmethod
    def _environment(spec: TaskSpec) -> dict[str, str]:
        """The spec's env, with GPU visibility made right for a container.

        NVIDIA_VISIBLE_DEVICES names host GPUs (that is what the NVIDIA runtime reads); without GPUs it is
        "void", else a CUDA image's own ``=all`` would expose every GPU on an engine whose default runtime is
        nvidia. Inside the container the granted GPUs are numbered from 0, so a CUDA_VISIBLE_DEVICES naming
        the host ids is renumbered (host ids 2,3 -> 0,1)."""
        env = dict(spec.env)
        env[SCRIPT_ENV] = spec.script  # shim.sh takes it out of the environment before the command runs
        host_ids = ",".join(str(g) for g in spec.gpus)
        env.setdefault("NVIDIA_VISIBLE_DEVICES", host_ids or "void")
        if spec.gpus and env.get("CUDA_VISIBLE_DEVICES") == host_ids:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(spec.gpus)))
        return env

    def _ensure_image(self, image: str, task_dir: Path) -> None:
        """Present, or pulled within ``pull_timeout``; else TaskStartError(254): why and what to do (also logged)."""
        try:
            self.client.images.get(image)
            return
        except ImageNotFound:
            pass
        except APIError as exc:
            raise TaskStartError(EXIT_START_FAILED, f"could not inspect image {image}: {_short(exc)}") from exc
        repo, tag = parse_repository_tag(image)
        outcome: list[BaseException | None] = []

        def pull() -> None:
            try:
                for event in self.client.api.pull(repo, tag=tag or "latest", stream=True, decode=True):
                    if isinstance(event, dict) and event.get("error"):
                        raise RuntimeError(event["error"])
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=pull, name="pai-docker-pull", daemon=True)
        thread.start()
        thread.join(self.pull_timeout)
        if not outcome:
            reason: str = f"the pull did not finish within {self.pull_timeout:g} s"
        elif outcome[0] is not None:
            reason = _short(outcome[0], 200)
        else:
            with contextlib.suppress(ImageNotFound, APIError):
                self.client.images.get(image)
                return
            reason = "the pull finished but the image is still missing"
        why = f"image not found: {image} is not present locally and could not be pulled ({reason}); pull or build it"
        why += f" (docker pull {image}) or use processes: pai cluster stop; pai cluster start --runtime process"
        shutil.rmtree(task_dir / taskdir.RUN, ignore_errors=True)  # a container's logs live in run/ (logs_dir)
        taskdir.record_start_failure(self.logs_dir(task_dir), why)
        raise TaskStartError(EXIT_IMAGE_NOT_FOUND, why)

    # ---- wait, stop, liveness ------------------------------------------------------------------------------------
    def logs_dir(self, task_dir: Path) -> Path:
        return Path(task_dir) / taskdir.RUN  # the container's shim writes them: read with safeio

    async def wait(self, handle: TaskHandle, task_dir: Path) -> TaskExit:
        code = taskdir.exit_code(self.logs_dir(task_dir))
        try:
            container = await _in_thread(lambda: self._wait_blocking(handle.id))
        except NotFound:
            if code is not None:
                return TaskExit(exit_code=code, signal=code - 128 if 128 < code <= 128 + 64 else None)
            return TaskExit(
                EXIT_LOST,
                "the task's container is gone (removed while the daemon was not watching) and left no exit status",
            )
        state = container.attrs.get("State") or {}
        code = taskdir.exit_code(self.logs_dir(task_dir))
        diag = ""
        if code is None:  # the shim did not finish: killed with the container
            code = int(state.get("ExitCode") or 0)
            if handle.id in self._stopped and code == 137:
                diag = "killed with SIGKILL: the task did not end within the stop grace period"
        sig = code - 128 if 128 < code <= 128 + 64 else None
        if code != 0 and (state.get("OOMKilled") or taskdir.oom_killed(self.logs_dir(task_dir))):
            limit = handle.info.get("memory_mb") or self._memory_mb(container)
            diag = f"out of memory: the task used more than {limit} MB (limit enforced by Docker)"
            return TaskExit(exit_code=code, diagnostics=diag, oom=True, signal=sig)
        if state.get("Error"):
            diag = f"docker: {state['Error']}"
        return TaskExit(exit_code=code, diagnostics=diag, signal=sig)

    def _wait_blocking(self, cid: str) -> Any:
        """The container once it has stopped; rides out a dockerd restart (the connection drops, the container
        may live on with live-restore) for up to a minute. Raises NotFound when the container is gone."""
        give_up = None
        while True:
            try:
                self.client.api.wait(cid, timeout=None)
                return self.client.containers.get(cid)
            except DockerException:  # NotFound and the like (APIError is also a requests HTTPError)
                raise
            except requests.exceptions.RequestException:
                give_up = give_up or time.monotonic() + 60
                if time.monotonic() > give_up:
                    raise
                time.sleep(1)

    # ---- inside a running task: services, terminals, metrics ----------------------------------------------------
    def terminal_command(
        self, handle: TaskHandle, env: dict[str, str], cwd: str | None
    ) -> tuple[list[str], dict[str, str], str | None]:
        """``docker exec -it`` with the task's env (a pty makes -t work); needs the docker CLI on the host."""
        cli = shutil.which("docker")
        if cli is None:
            raise RuntimeError("the docker command-line client is not installed on the daemon's host")
        argv = [cli, "exec", "-it", "-e", "TERM=xterm-256color"]
        if cwd:
            argv += ["-w", cwd]
        return [*argv, handle.id, "/bin/sh"], {k: v for k, v in os.environ.items()}, None

    def sample(self, handle: TaskHandle) -> TaskSample | None:
        """From the container's cgroup v1 files (cheap), else Docker's stats API (slow: about a second)."""
        for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            cpu = Path(base, "cpuacct", "docker", handle.id, "cpuacct.usage")
            mem = Path(base, "memory", "docker", handle.id, "memory.usage_in_bytes")
            if cpu.exists() and mem.exists():
                with contextlib.suppress(OSError, ValueError):
                    return TaskSample(int(cpu.read_text()) / 1e9, int(mem.read_text()))
        try:
            stats = self.client.containers.get(handle.id).stats(stream=False)
        except DockerException:
            return None
        cpu_ns = (stats.get("cpu_stats") or {}).get("cpu_usage", {}).get("total_usage", 0)
        return TaskSample(cpu_ns / 1e9, int((stats.get("memory_stats") or {}).get("usage", 0)))

    @staticmethod
    def _memory_mb(container: Any) -> int:
        return int((container.attrs.get("HostConfig") or {}).get("Memory") or 0) >> 20

    def stop(self, handle: TaskHandle, grace: float = 3.0, sig: int = signal.SIGTERM) -> None:
        """``docker stop`` would signal only PID 1 (the shim, which ignores SIGTERM), so signal everything else
        in the container from inside it (as the process runtime's killpg does), then SIGKILL after ``grace``."""

        self._stopped.add(handle.id)

        def run() -> None:
            deadline = time.monotonic() + grace
            with contextlib.suppress(DockerException):
                container = self.client.containers.get(handle.id)
                if container.status not in ALIVE_STATES:
                    return
                with contextlib.suppress(DockerException):
                    container.exec_run(["/bin/sh", "-c", f"kill -{signal.Signals(sig).name[3:]} -1"], detach=False)
                while time.monotonic() < deadline:
                    time.sleep(0.05)
                    container.reload()
                    if container.status not in ALIVE_STATES:
                        return
                container.kill()

        threading.Thread(target=run, name="pai-docker-stop", daemon=True).start()

    def is_alive(self, handle: TaskHandle) -> bool:
        try:
            return self.client.containers.get(handle.id).status in ALIVE_STATES
        except DockerException:
            return False

    def remove(self, handle: TaskHandle) -> None:
        self._stopped.discard(handle.id)
        with contextlib.suppress(NotFound):
            self.client.api.remove_container(handle.id, force=True)

    # ---- recovery ------------------------------------------------------------------------------------------------
    @staticmethod
    def _handle(container: Any) -> TaskHandle:
        labels = container.labels or {}
        image = (container.attrs.get("Config") or {}).get("Image")
        return TaskHandle(
            runtime="docker",
            id=container.id,
            info={
                "image": image,
                "name": container.name,
                "key": labels.get("pai.key"),
                "task_dir": labels.get("pai.task_dir"),
            },
        )

    def recover(self) -> list[TaskHandle]:
        containers = self.client.containers.list(all=True, filters={"label": "pai.managed=1"})
        return [self._handle(c) for c in containers]

    def find(self, task_dir: str | Path) -> TaskHandle | None:
        td = Path(task_dir).resolve()
        written = taskdir.read_handle(td)
        if written is not None:
            with contextlib.suppress(ValueError, KeyError):
                return TaskHandle.from_dict(written)
        found = self.client.containers.list(all=True, filters={"label": f"pai.task_dir={td}"})
        return self._handle(found[0]) if found else None
