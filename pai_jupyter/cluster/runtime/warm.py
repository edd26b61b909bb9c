"""Warm shims: C shims started ahead of their task, each already inside a fresh cgroup of its own.

On cgroup v1, moving a process into a cgroup (a write to ``cgroup.procs``) waits for an RCU grace period: 5 to
40 ms measured on these machines, more than the rest of a task start together. A warm shim has paid that before
any task needed it; a task start only sets the limits on its cgroup and hands it the task directory
(``shim.c`` describes what it is handed). A refill thread keeps ``size`` of them ready; when none is ready (a burst
of starts) the runtime starts a task the ordinary way, so a warm pool never delays a start.

A warm shim whose daemon goes away reads end-of-file and exits; its empty cgroup is removed by the next
daemon's sweep (``CgroupManager.sweep``), or at once on a clean shutdown (``close``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import threading
from dataclasses import dataclass

from .cgroups import CgroupManager, TaskCgroup

log = logging.getLogger(__name__)

PREFIX = "warm-"
MAX_FAILURES = 3  # in a row: then the pool gives up and every start is an ordinary one


@dataclass
class WaitingShim:
    """A started C shim that waits on its stdin for its task (``shim.c``), inside ``cgroup`` when it has one."""

    popen: subprocess.Popen[bytes]
    cgroup: TaskCgroup | None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def hand(self, task_dir: str, work_dir: str, notice: str, env: dict[str, str]) -> None:
        """Give the shim its task; raises OSError when it is gone."""
        assert self.popen.stdin is not None
        fields = [os.fsencode(task_dir), os.fsencode(work_dir), notice.encode(),
                  *(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items())]
        try:
            self.popen.stdin.write(b"\0".join(fields) + b"\0")
        finally:
            self.popen.stdin.close()

    def discard(self) -> None:
        """Let the shim exit without a task (end-of-file) and remove its cgroup."""
        with contextlib.suppress(OSError):
            if self.popen.stdin is not None:
                self.popen.stdin.close()
        try:
            self.popen.wait(2)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        if self.cgroup is not None:
            self.cgroup.remove(timeout=1.0)


def spawn_shim(shim_path: str, cgroup: TaskCgroup | None) -> WaitingShim:
    """Start a C shim in a new session and move it into ``cgroup`` (the slow part on cgroup v1); raises OSError."""
    popen = subprocess.Popen([shim_path], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd="/", env={}, close_fds=True, start_new_session=True)
    shim = WaitingShim(popen, cgroup)
    if cgroup is not None:
        try:
            for path in cgroup.procs_paths():
                with open(path, "w") as f:
                    f.write(str(popen.pid))
        except OSError:
            shim.discard()
            raise
    return shim


class WarmPool:
    """Keeps ``size`` warm shims of ``shim_path`` ready in cgroups made by ``cgroups``."""

    def __init__(self, shim_path: str, cgroups: CgroupManager, size: int = 2) -> None:
        self.shim_path, self.cgroups, self.size = shim_path, cgroups, size
        self._ready: list[WaitingShim] = []
        self._cond = threading.Condition()
        self._closed = False
        self._failures = 0
        self._serial = 0
        self._tag = f"{PREFIX}{os.getpid()}-"
        cgroups.sweep(PREFIX)
        self._thread = threading.Thread(target=self._refill, name="pai-warm-shims", daemon=True)
        self._thread.start()

    @property
    def enabled(self) -> bool:
        return not self._closed

    def take(self) -> WaitingShim | None:
        """A ready warm shim (its replacement is started in the background), or None when none is ready."""
        with self._cond:
            shim = self._ready.pop(0) if self._ready else None
            self._cond.notify()
        return shim

    def close(self) -> None:
        """Stop refilling and let every ready shim exit, removing its cgroup."""
        with self._cond:
            self._closed = True
            ready, self._ready = self._ready, []
            self._cond.notify()
        for shim in ready:
            shim.discard()

    def _refill(self) -> None:
        while True:
            with self._cond:
                while not self._closed and len(self._ready) >= self.size:
                    self._cond.wait()
                if self._closed:
                    return
                self._serial += 1
                key = f"{self._tag}{self._serial}"
            try:
                shim = self._start(key)
            except OSError as exc:
                self._failures += 1
                log.warning("could not start a warm shim (%s); %s", exc,
                            "giving up: tasks start the ordinary way" if self._failures >= MAX_FAILURES else
                            "trying again")
                if self._failures >= MAX_FAILURES:
                    self.close()
                    return
                continue
            self._failures = 0
            with self._cond:
                if self._closed:
                    late = shim
                else:
                    self._ready.append(shim)
                    late = None
            if late is not None:
                late.discard()

    def _start(self, key: str) -> WaitingShim:
        cgroup = self.cgroups.make(key)
        try:
            return spawn_shim(self.shim_path, cgroup)
        except OSError:
            cgroup.remove(0)
            raise
