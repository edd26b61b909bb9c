"""A process-runtime task's process tree on this host: who it is (the kernel's start ticks, not a reused pid),
signalling all of it (group, descendants, cgroup), waiting for its end without being its parent (pidfd), how it
ended (exit code, signal, OOM), and the memory watchdog for hosts without a writable cgroup."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import psutil

from . import taskdir
from .base import EXIT_LOST, TaskExit, TaskHandle
from .cgroups import TaskCgroup

CLK_TCK = os.sysconf("SC_CLK_TCK")


def stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) of a pid, or None when there is no such process.

    The kernel's start ticks identify a process exactly (a reused pid has later ones) and, unlike a wall-clock
    create_time, do not move when the clock is stepped between a daemon and its restarted successor."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[19])


def same_process(handle: TaskHandle, st: tuple[str, int] | None) -> bool:
    """``st`` (from ``stat``) is the handle's process: same start ticks (or, for an older handle, create time)."""
    if st is None:
        return False
    ticks = handle.info.get("start_ticks")
    if ticks is not None:
        return st[1] == int(ticks)
    created = handle.info.get("create_time")
    if created is None:
        return True
    with contextlib.suppress(psutil.Error):
        return abs(psutil.Process(int(handle.id)).create_time() - float(created)) < 0.05
    return False


def is_alive(handle: TaskHandle) -> bool:
    """The handle's process still runs (not a zombie, not a later process that reused its pid)."""
    st = stat(int(handle.id))
    return st is not None and st[0] != "Z" and same_process(handle, st)


def signal_task(handle: TaskHandle, sig: int) -> None:
    """Signal the task's process group, every descendant of its shim (the C shim is a subreaper: what left
    the group with setsid is still below it) and everything in its cgroup; never a reused pid's group."""
    pid = int(handle.id)
    st = stat(pid)
    if st is None or same_process(handle, st):  # a dead leader's group may still hold orphans
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
    # a live shim's descendants (an exited one's were re-parented when it exited: walking /proc would find none)
    if st is not None and st[0] not in ("Z", "X") and same_process(handle, st):
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    child.send_signal(sig)
    cgroup = TaskCgroup.from_info(handle.info)
    if cgroup is not None:
        cgroup.signal_all(sig)


async def exited(handle: TaskHandle) -> None:
    """Resolve when the shim has exited: a pidfd becomes readable then, for a child or not."""
    pid = int(handle.id)
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (OSError, AttributeError):
        while is_alive(handle):
            await asyncio.sleep(0.05)
        return
    try:
        if not is_alive(handle):  # checked after opening: the pidfd is then surely this process's
            return
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        loop.add_reader(fd, wake)
        try:
            await done
        finally:
            loop.remove_reader(fd)
    finally:
        os.close(fd)


async def watchdog(handle: TaskHandle, td: Path, limit_mb: int, interval: float) -> None:
    """Kill the task's command when its process tree's RSS goes over the limit, like the kernel's OOM killer.

    The shim and its tees are spared so the logs stay complete and the shim records the command's 137; if
    the task is not gone 2 s later, the whole group gets SIGKILL."""
    limit = limit_mb << 20
    try:
        shim = psutil.Process(int(handle.id))
    except psutil.Error:
        return
    while True:
        await asyncio.sleep(interval)
        try:
            procs = [shim, *shim.children(recursive=True)]
        except psutil.Error:
            return
        rss = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                rss += p.memory_info().rss
        if rss > limit:
            break
    taskdir.write_private(td / taskdir.OOM, f"rss {rss} bytes > limit {limit} bytes\n")
    for p in command_processes(shim, procs):
        with contextlib.suppress(psutil.Error):
            p.kill()
    await asyncio.sleep(2.0)
    signal_task(handle, signal.SIGKILL)


def command_processes(shim: psutil.Process, procs: list[psutil.Process]) -> list[psutil.Process]:
    """Everything in the tree but the shim's own shells (same command line) and its two tees."""
    try:
        shim_cmd = shim.cmdline()
    except psutil.Error:
        return procs
    cmds: dict[int, list[str]] = {}
    for p in procs[1:]:
        with contextlib.suppress(psutil.Error):
            cmds[p.pid] = p.cmdline()
    shells = {shim.pid} | {pid for pid, cmd in cmds.items() if cmd == shim_cmd}
    victims = []
    for p in procs[1:]:
        with contextlib.suppress(psutil.Error):
            if p.pid in shells or (cmds.get(p.pid, [])[:1] == ["tee"] and p.ppid() in shells):
                continue
            victims.append(p)
    return victims


def task_exit(handle: TaskHandle, td: Path, status: int | None, stopped: bool) -> TaskExit:
    """How a task ended: its shim's exit code (or the wait status, or what a kill without one means), the signal,
    and whether an OOM kill made it fail. ``stopped``: the daemon stopped it. Read before its cgroup goes."""
    code = taskdir.exit_code(td)
    diag = ""
    if code is None:
        if status is not None:
            code = 128 - status if status < 0 else status
        elif taskdir.has_file(td, taskdir.OOM) or stopped:
            code = 128 + signal.SIGKILL
        else:
            return TaskExit(EXIT_LOST, "the task ended while the daemon was down and left no exit status")
        if stopped and code == 128 + signal.SIGKILL:
            diag = "killed with SIGKILL: the task did not end within the stop grace period"
    sig = code - 128 if 128 < code <= 128 + 64 else None
    oom, how = _oom(handle, td, code)
    limit = handle.info.get("memory_mb")
    if oom:
        diag = f"out of memory: the task used more than {limit} MB (limit enforced by {how})"
    if forks := _forks_refused(handle):
        diag = f"{diag}; {forks}" if diag else forks
    return TaskExit(exit_code=code, diagnostics=diag, oom=oom, signal=sig)


def _forks_refused(handle: TaskHandle) -> str:
    """What the task's pids limit did, when it refused a fork (a fork bomb's only trace once it is stopped)."""
    cgroup = TaskCgroup.from_info(handle.info)
    refused, limit = cgroup.forks_refused() if cgroup is not None else (0, "")
    if not refused:
        return ""
    return f"the task reached its limit of {limit} processes (pids cgroup): {refused} fork{'s' * (refused > 1)} refused"


def _oom(handle: TaskHandle, td: Path, code: int) -> tuple[bool, str]:
    """An OOM kill that made the task fail (a task that survived one of its processes being killed did not)."""
    if code == 0:
        return False, ""
    if taskdir.has_file(td, taskdir.OOM):
        return True, "the process runtime's memory watchdog"
    cgroup = TaskCgroup.from_info(handle.info)
    if cgroup is None:
        return False, ""
    oom = cgroup.oom_kills() > 0 or (code == 128 + signal.SIGKILL and cgroup.failcnt() > 0)
    return oom, cgroup.describe()
