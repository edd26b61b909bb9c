"""C shims waiting for their task, and warm ones: started ahead, in a ready task directory and cgroup.

A task start that makes everything when the task comes pays, on the machines this runs on, up to a millisecond
for each new file or directory (a task has about ten) and, on cgroup v1, an RCU grace period (5 to 40 ms
measured) to move the shim into its cgroup. A warm shim has paid all that before any task needed it: its
directory under ``warm_dir`` holds ``work/``, an empty ``command.sh`` and the shim's own files, and it sits in
a fresh cgroup. A task start then renames that directory to the task's, writes the command and the limits into
what exists, and hands the shim its task (``shim.c`` says what it is handed). A refill thread keeps ``size`` of
them ready; when none is ready (a burst of starts) the runtime starts a shim right then, in the task's own
directory, so a warm pool never delays a start.

A warm directory has no handle.json: a daemon that dies before the hand-over takes its shim with it, and a task
directory without one is a task that never started, which the restarted daemon queues again. A warm shim whose
daemon goes away reads end-of-file and exits; its directory and empty cgroup are removed by the next daemon's
pool (``sweep``), or at once on a clean shutdown (``close``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

from . import taskdir
from .cgroups import CgroupManager, TaskCgroup

log = logging.getLogger(__name__)

PREFIX = "warm-"
MAX_FAILURES = 3  # in a row: then the pool gives up and every start makes its shim then


@dataclass
class WaitingShim:
    """A started C shim that waits on its stdin for its task, its files made in ``directory``."""

    popen: subprocess.Popen[bytes]
    directory: Path
    cgroup: TaskCgroup | None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def hand(
        self,
        task_dir: str,
        work_dir: str,
        notice: str,
        script: str,
        run_as: tuple[int, int] | None,
        env: dict[str, str],
    ) -> None:
        """Give the shim its task (the script and environment travel over a pipe, never the disk); raises
        OSError when it is gone."""
        assert self.popen.stdin is not None
        cred = f"{run_as[0]}:{run_as[1]}" if run_as else ""
        fields = [
            os.fsencode(task_dir),
            os.fsencode(work_dir),
            notice.encode(),
            script.replace("\0", "").encode(),
            cred.encode(),
            *(os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()),
        ]
        try:
            self.popen.stdin.write(b"\0".join(fields) + b"\0")
        finally:
            self.popen.stdin.close()

    def discard(self, remove_dir: bool = True) -> None:
        """Let the shim exit without a task (end-of-file); remove its cgroup and, for a warm one, its directory."""
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
        if remove_dir:
            shutil.rmtree(self.directory, ignore_errors=True)


def spawn_shim(shim_path: str, directory: Path, cgroup: TaskCgroup | None, *, ready: bool = False) -> WaitingShim:
    """Start a C shim for ``directory`` in a new session and move it into ``cgroup`` (slow on cgroup v1). With
    ``ready``, return only once its files are made (the directory may be renamed after that). Raises OSError."""
    popen = subprocess.Popen(
        [shim_path, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE if ready else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd="/",
        env={},
        close_fds=True,
        start_new_session=True,
    )
    shim = WaitingShim(popen, directory, cgroup)
    try:
        if cgroup is not None:
            cgroup.enter(popen.pid)
        if ready:
            assert popen.stdout is not None
            with popen.stdout:
                if popen.stdout.read(1) != b"\n":
                    raise OSError(f"the shim exited before it was ready (status {popen.wait()})")
    except OSError:
        shim.discard(remove_dir=False)
        raise
    return shim


class WarmPool:
    """Keeps ``size`` warm shims of ``shim_path`` ready under ``warm_dir`` (in cgroups made by ``cgroups``)."""

    def __init__(self, shim_path: str, warm_dir: Path, cgroups: CgroupManager | None, size: int = 2) -> None:
        self.shim_path, self.warm_dir, self.cgroups, self.size = shim_path, warm_dir, cgroups, size
        self._ready: list[WaitingShim] = []
        self._cond = threading.Condition()
        self._closed = False
        self._failures = 0
        self._serial = 0
        self._tag = f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}-"  # a restarted daemon may get the same pid
        self._thread: threading.Thread | None = None

    def begin(self) -> None:
        """Sweep what a dead daemon left and start filling the pool (kept apart from the constructor, so a
        daemon answers first and warms up after: the first shims cost ~0.1 s of the machine)."""
        if self._thread is None and not self._closed:
            self.sweep()
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
        """Stop refilling and let every ready shim exit, removing its directory and cgroup."""
        with self._cond:
            self._closed = True
            ready, self._ready = self._ready, []
            self._cond.notify()
        for shim in ready:
            shim.discard()

    def sweep(self) -> None:
        """Remove what warm shims of daemons no longer running left behind (a daemon killed with -9): directories
        named after a pid that is gone. (One that had our pid leaves its few empty files to a later daemon.)"""
        with contextlib.suppress(OSError):
            for d in self.warm_dir.glob(f"{PREFIX}*"):
                owner = d.name[len(PREFIX) :].split("-")[0]
                if owner.isdigit() and not psutil.pid_exists(int(owner)):
                    shutil.rmtree(d, ignore_errors=True)
        if self.cgroups is not None:
            self.cgroups.sweep(PREFIX)

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
                log.warning(
                    "could not start a warm shim (%s); %s",
                    exc,
                    "giving up: tasks start their shim when they come"
                    if self._failures >= MAX_FAILURES
                    else "trying again",
                )
                if self._failures >= MAX_FAILURES:
                    self.close()
                    return
                continue
            self._failures = 0
            with self._cond:
                late = shim if self._closed else None
                if late is None:
                    self._ready.append(shim)
            if late is not None:
                late.discard()

    def _start(self, key: str) -> WaitingShim:
        directory = self.warm_dir / key
        (directory / taskdir.WORK).mkdir(parents=True)
        (directory / taskdir.RUN).mkdir()
        (directory / taskdir.COMMAND).touch()
        cgroup = self.cgroups.make(key) if self.cgroups is not None else None
        try:
            shim = spawn_shim(self.shim_path, directory, cgroup, ready=True)
        except OSError:
            if cgroup is not None:
                cgroup.remove(0)
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return shim
