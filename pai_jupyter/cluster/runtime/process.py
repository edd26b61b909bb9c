"""The process runtime: each task is a process group under the shim (shim.c, or shim.sh), on this host, with no engine.

Everything needed to find a task again is on disk or in the TaskHandle (pid + kernel start time, cgroup
paths), so a daemon restarted after ``kill -9`` re-attaches with ``wait()`` on a process that is no longer its
child (pidfd), and reads the exit status the shim left in the task directory.

Memory limits: a per-task cgroup when this machine lets us make one (the kernel enforces it), else a watchdog
in ``wait()`` that sums the RSS of the task's process tree every 200 ms. The diagnostics say which one acted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import psutil

from ...common import safeio
from . import proctree, taskdir
from .base import (
    DEFAULT_PIDS_LIMIT,
    EXIT_START_FAILED,
    Runtime,
    TaskExit,
    TaskHandle,
    TaskSample,
    TaskSpec,
    TaskStartError,
)
from .cgroups import CgroupManager, TaskCgroup
from .hostenv import host_env
from .shim import Shim, choose_shim, shell_in_task
from .taskdir import SCRIPT_ENV, read_int
from .warm import WaitingShim, WarmPool, spawn_shim

ENFORCEMENTS = ("auto", "cgroup", "watchdog")


class ProcessRuntime(Runtime):
    """Runs tasks as local process groups.

    ``memory_enforcement``: "auto" (cgroup where writable, else watchdog), "cgroup" (fail at construction when
    cgroups are unusable) or "watchdog" (never touch cgroups). ``cpu_limits``: also give each task a cpu cgroup
    (CFS quota of ``cpu`` cores, weight of ``cpu`` processes) where writable; under CPU contention a task then
    gets its share as one group, which makes trivial tasks slower to start on a loaded machine. ``pids_limit``:
    the most processes (threads too) a task may have, where a pids cgroup is writable (0: no limit)."""

    name = "process"

    def __init__(
        self,
        memory_enforcement: str = "auto",
        watchdog_interval: float = 0.2,
        cpu_limits: bool = True,
        shim: Shim | None = None,
        warm_shims: int = 0,
        warm_dir: Path | None = None,
        pids_limit: int = DEFAULT_PIDS_LIMIT,
    ) -> None:
        if memory_enforcement not in ENFORCEMENTS:
            raise ValueError(f"memory_enforcement must be one of {ENFORCEMENTS}, not {memory_enforcement!r}")
        self.cgroups = CgroupManager(cpu_limits, pids_limit) if memory_enforcement != "watchdog" else None
        if memory_enforcement == "cgroup" and not (self.cgroups and self.cgroups.available):
            raise RuntimeError("memory_enforcement='cgroup' but no writable memory cgroup was found on this machine")
        self.use_cgroups = bool(self.cgroups and self.cgroups.available)
        self.watchdog_interval = watchdog_interval
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._stopped: set[str] = set()
        self._boot_time = psutil.boot_time()
        self.shim = shim or choose_shim()
        self.warm: WarmPool | None = None
        if warm_shims > 0 and self.shim.kind == "c" and warm_dir is not None:
            self.warm = WarmPool(
                self.shim.argv[0], Path(warm_dir), self.cgroups if self.use_cgroups else None, warm_shims
            )

    def describe(self) -> str:
        how = self.cgroups.describe() if self.use_cgroups and self.cgroups else "watchdog"
        shim = "C shim" if self.shim.kind == "c" else f"sh shim: {self.shim.note}" if self.shim.note else "sh shim"
        if self.warm is not None and self.warm.enabled:
            shim += f", {self.warm.size} warm"
        pids = self.cgroups.describe_pids() if self.use_cgroups and self.cgroups else "not limited (no cgroup)"
        return f"process (memory limit: {how}; processes: {pids}; escaped processes: {self.containment()}; {shim})"

    def containment(self) -> str:
        """What keeps a task's processes that leave its process group (setsid, double fork) attributed to it."""
        if self.use_cgroups:
            return "held by the task's cgroup"
        if self.shim.kind == "c":
            return "kept by the shim as subreaper (counted and stopped with the task)"
        return "not contained (no cgroup, sh shim: a setsid'd process escapes the watchdog and stop)"

    def begin(self) -> None:
        if self.warm is not None:
            self.warm.begin()

    def close(self) -> None:
        if self.warm is not None:
            self.warm.close()

    # ---- start -----------------------------------------------------------------------------------------------
    def start(self, spec: TaskSpec) -> TaskHandle:
        handle = self._start(spec, quick=False)
        assert handle is not None
        return handle

    def start_quick(self, spec: TaskSpec) -> TaskHandle | None:
        """A start by a warm shim: a rename, a few small writes and a hand-over (no fork, no cgroup move)."""
        return self._start(spec, quick=True)

    def _start(self, spec: TaskSpec, quick: bool) -> TaskHandle | None:
        td = Path(os.path.abspath(spec.task_dir))  # the shim runs in work_dir: a relative path would move
        env = host_env(spec.env)
        cwd = spec.work_dir or str(td)
        notice = (
            (f"[pai_jupyter] process runtime: the image {spec.image!r} was not used; the task runs on this host.\n")
            if spec.image
            else ""
        )
        if self.shim.kind == "c":
            return self._start_c(spec, td, env, cwd, notice, quick)
        if quick:
            return None
        if spec.run_as is not None:
            raise TaskStartError(
                EXIT_START_FAILED,
                "the task could not start: running a task as its user's own "
                "account needs the C shim, and this host has no C compiler to build it",
            )
        self._fresh_dir(spec, td)
        taskdir.write_command(td, spec.disk_script())
        if notice:
            taskdir.add_notice(td, notice)
        cgroup = self._make_cgroup(spec)
        if cgroup is not None:
            taskdir.write_private(td / taskdir.CGROUP, "".join(p + "\n" for p in cgroup.procs_paths()))
        try:  # the script reaches shim.sh in its environment (private to the task's account), not on disk
            popen = subprocess.Popen(
                [*self.shim.argv, str(td)],
                cwd=cwd,
                env={**env, SCRIPT_ENV: spec.script},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                start_new_session=True,
            )
        except OSError as exc:
            if cgroup is not None:
                cgroup.remove(0)
            raise TaskStartError(EXIT_START_FAILED, f"the task could not start: {exc}") from exc
        self._children[popen.pid] = popen
        handle = self._handle(popen.pid, spec, cgroup)
        try:
            return self._write_handle(td, handle)
        except OSError as exc:  # (a full disk): the daemon starts it again, so this one must not run on beside that
            proctree.signal_task(handle, signal.SIGKILL)
            raise TaskStartError(EXIT_START_FAILED, f"the task could not start: {exc}") from exc

    @staticmethod
    def _fresh_dir(spec: TaskSpec, td: Path) -> None:
        """The task directory without what an earlier start left in it, and its work dir when that is inside."""
        td.mkdir(parents=True, exist_ok=True)
        taskdir.clear_stale(td)
        ProcessRuntime._inner_work_dir(spec, td)

    @staticmethod
    def _inner_work_dir(spec: TaskSpec, td: Path) -> None:
        """The task's own parts of its directory (``run/``, and ``work/`` when it is the working directory), made
        by the runtime and given to the task's account; the directory itself stays root's (``taskdir``)."""
        inner = bool(spec.work_dir and Path(spec.work_dir).parent == td)
        taskdir.make_task_parts(td, spec.run_as, work=False)
        if inner:
            assert spec.work_dir is not None
            Path(spec.work_dir).mkdir(mode=0o700, exist_ok=True)
            taskdir.give(Path(spec.work_dir), spec.run_as)
        taskdir.share(td, spec.run_as)

    def _start_c(
        self, spec: TaskSpec, td: Path, env: dict[str, str], cwd: str, notice: str, quick: bool
    ) -> TaskHandle | None:
        """A warm shim moved into place when one is ready, else (unless ``quick``) one started now in the task
        directory; then the command and handle.json are written and the task handed to the shim (see shim.c)."""
        shim = self._take_warm(spec, td)
        if shim is None and quick:
            return None
        warm = shim is not None
        if shim is None:
            self._fresh_dir(spec, td)
            cgroup = self._make_cgroup(spec)
            try:
                shim = spawn_shim(self.shim.argv[0], td, cgroup)
            except OSError as exc:
                if cgroup is not None:
                    cgroup.remove(0)
                raise TaskStartError(EXIT_START_FAILED, f"the task could not start: {exc}") from exc
        try:
            if warm:
                self._inner_work_dir(spec, td)
            if not os.path.isdir(cwd):
                raise TaskStartError(EXIT_START_FAILED, f"the task could not start: no working directory {cwd!r}")
            taskdir.write_command(td, spec.disk_script())
            self._children[shim.pid] = shim.popen
            handle = self._handle(shim.pid, spec, shim.cgroup)
            handle.info["exec_socket"] = str(td / taskdir.EXEC_SOCKET)  # shells in the task (terminal_command)
            self._write_handle(td, handle)  # before the task can run
            shim.hand(str(td), cwd, notice, spec.script, spec.run_as, env)
        except (OSError, TaskStartError) as exc:
            self._children.pop(shim.pid, None)
            shim.discard(remove_dir=False)
            if isinstance(exc, TaskStartError):
                raise
            raise TaskStartError(EXIT_START_FAILED, f"the task could not start: {exc}") from exc
        return handle

    def _take_warm(self, spec: TaskSpec, td: Path) -> WaitingShim | None:
        """A ready warm shim with the task's limits, its directory renamed to ``td``; None when there is none
        ready or ``td`` already holds files (a start again into the same directory)."""
        shim = self.warm.take() if self.warm is not None else None
        if shim is None:
            return None
        try:
            if self.cgroups is not None and shim.cgroup is not None:
                self.cgroups.limit(shim.cgroup, spec.memory_mb, spec.cpu)
            os.rename(shim.directory, td)
        except OSError:
            shim.discard()
            return None
        shim.directory = td
        return shim

    def _handle(self, pid: int, spec: TaskSpec, cgroup: TaskCgroup | None) -> TaskHandle:
        info: dict[str, Any] = {
            "create_time": None,
            "start_ticks": None,
            "image": spec.image,
            "memory": ("cgroup" if cgroup else "watchdog") if spec.memory_mb > 0 else "none",
            "memory_mb": spec.memory_mb,
            "cgroup": None,
        }
        if spec.run_as is not None:
            info["run_as"] = list(spec.run_as)
        st = proctree.stat(pid)
        if st is not None:  # psutil's create_time, from the same /proc read
            info["start_ticks"], info["create_time"] = st[1], (st[1] / proctree.CLK_TCK) + self._boot_time
        if cgroup is not None:
            info.update(cgroup.to_info())
        return TaskHandle(runtime=self.name, id=str(pid), info=info)

    @staticmethod
    def _write_handle(td: Path, handle: TaskHandle) -> TaskHandle:
        taskdir.write_handle(td, handle.to_dict())  # for find() if the daemon dies right now
        return handle

    def _make_cgroup(self, spec: TaskSpec) -> TaskCgroup | None:
        if not self.use_cgroups or self.cgroups is None:
            return None
        if spec.memory_mb <= 0 and spec.cpu <= 0 and self.cgroups.pids_parent is None:
            return None
        try:
            return self.cgroups.create(spec.key, spec.memory_mb, spec.cpu)
        except OSError as exc:
            raise TaskStartError(EXIT_START_FAILED, f"could not create the task's cgroup: {exc}") from exc

    # ---- inside a running task: services, terminals, metrics ----------------------------------------------------
    def terminal_command(
        self, handle: TaskHandle, env: dict[str, str], cwd: str | None
    ) -> tuple[list[str], dict[str, str], str | None]:
        """A shell inside the task: started by the task's C shim (so in its account, cgroups and process tree, and
        gone when the task ends), which ``pai-shim --exec`` reaches through the shim's socket. No ``cwd`` for the
        client: the shell changes to it as the task's account. A task of shim.sh runs as the daemon's account (a
        root daemon needs the C shim), and its shell is the daemon's child."""
        socket, ticks = handle.info.get("exec_socket"), handle.info.get("start_ticks")
        shell_env = {**host_env(env), "TERM": "xterm-256color"}
        if socket and ticks is not None and self.shim.kind == "c":
            shim = (int(handle.id), int(ticks))
            argv, wrapped = shell_in_task(self.shim.argv[0], str(socket), shim, cwd, ["/bin/sh", "-i"], shell_env)
            return argv, wrapped, None
        if handle.info.get("run_as"):
            raise RuntimeError(
                "a terminal in this task needs its C shim's socket (shim.c): the task was started by an older "
                "version, or this daemon has no C compiler; restart the task (or the daemon with a compiler)"
            )
        return ["/bin/sh", "-i"], shell_env, cwd

    def sample(self, handle: TaskHandle) -> TaskSample | None:
        """CPU seconds and RSS of the shim's whole process tree."""
        try:
            root = psutil.Process(int(handle.id))
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        cpu, rss = 0.0, 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                cpu += t.user + t.system
                rss += p.memory_info().rss
        return TaskSample(cpu, rss)

    def find(self, task_dir: str | Path) -> TaskHandle | None:
        """The handle of a task started from ``task_dir`` whose handle never reached the database."""
        td = Path(task_dir)
        written = taskdir.read_handle(td)
        if written is not None:
            with contextlib.suppress(ValueError, KeyError):
                return TaskHandle.from_dict(written)
        pid = read_int(td / taskdir.PID)
        if pid is None:
            return None
        # start_ticks -1 matches no process: unless the pid is still this task's shim, the task is over.
        info: dict[str, Any] = {"create_time": None, "start_ticks": -1, "memory": "none", "cgroup": None}
        with contextlib.suppress(psutil.Error, OSError, IndexError):
            if psutil.Process(pid).cmdline()[-1:] == [str(td)]:
                st = proctree.stat(pid)
                info["start_ticks"] = st[1] if st else -1
                info["create_time"] = (info["start_ticks"] / proctree.CLK_TCK) + self._boot_time
        with contextlib.suppress(OSError):
            procs = (safeio.read_text_beneath(td, taskdir.CGROUP) or "").split()
            if procs:
                info.update(TaskCgroup.from_procs(procs).to_info(), memory="cgroup")
        return TaskHandle(runtime=self.name, id=str(pid), info=info)

    # ---- liveness and stop -----------------------------------------------------------------------------------
    def is_alive(self, handle: TaskHandle) -> bool:
        return proctree.is_alive(handle)

    def stop(self, handle: TaskHandle, grace: float = 3.0, sig: int = signal.SIGTERM) -> None:
        self._stopped.add(handle.id)
        proctree.signal_task(handle, sig)

        def kill() -> None:
            proctree.signal_task(handle, signal.SIGKILL)

        try:
            asyncio.get_running_loop().call_later(grace, kill)
        except RuntimeError:
            timer = threading.Timer(grace, kill)
            timer.daemon = True
            timer.start()

    def remove(self, handle: TaskHandle) -> None:
        cgroup = TaskCgroup.from_info(handle.info)
        if cgroup is not None:
            cgroup.remove()
        self._children.pop(int(handle.id), None)
        self._stopped.discard(handle.id)

    # ---- wait --------------------------------------------------------------------------------------------------
    async def wait(self, handle: TaskHandle, task_dir: Path) -> TaskExit:
        td = Path(task_dir)
        pid = int(handle.id)
        popen = self._children.get(pid)
        limit = int(handle.info.get("memory_mb") or 0)
        watchdog = None
        if handle.info.get("memory") == "watchdog" and limit > 0:
            watchdog = asyncio.ensure_future(proctree.watchdog(handle, td, limit, self.watchdog_interval))
        try:
            await proctree.exited(handle)
        finally:
            if watchdog is not None:
                watchdog.cancel()
        # The task is over: nothing it started may outlive it (SIGTERM-proof orphans, setsid'd ones in the cgroup).
        proctree.signal_task(handle, signal.SIGKILL)
        status = None
        if popen is not None:
            status = popen.poll()
            if status is None:
                status = await asyncio.to_thread(popen.wait)
            self._children.pop(pid, None)
        result = proctree.task_exit(handle, td, status, handle.id in self._stopped)  # reads OOM counters: first
        cgroup = TaskCgroup.from_info(handle.info)
        if cgroup is not None:  # freed now, whether or not remove() follows; its rmdirs (~0.4 ms each) off the loop
            await asyncio.to_thread(cgroup.remove)
        return result
