"""A full disk: clear errors, a reserve so that running tasks can still finish, a floor below which submits wait.

The daemon's state is small but every change is a write: on a full disk SQLite answers "database or disk is
full" and, before this, a task whose processes had ended stayed RUNNING holding its capacity, DELETE was
refused and every submit got a generic 500. So the daemon keeps a reserve file in its directory: when a write
fails for want of space it gives the reserve back to the file system and tries once more, which is enough to
record that tasks ended, to stop and to delete jobs (which frees space). Submits are refused while the free
space is below a floor (507 naming the disk and what is free), and every other out-of-space failure of a request
is a 507 that says what is full and where, not a 500. A task's end that still cannot be written (the reserve was
spent and the disk is still full) is tried again with backoff until space returns (``eventually``), and the
reserve is made again as soon as it does; so is a job's start that the full disk refused (``again``): the job is
queued again, or its launched tasks start again, instead of being lost until a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import sqlite3
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TypeVar

from .errors import ApiError

log = logging.getLogger("pai_jupyter.cluster")
T = TypeVar("T")
RESERVE_NAME = ".space-reserve"
RESERVE_MB = 4
DEFAULT_FLOOR_MB = 64
RETRY_FIRST_S, RETRY_MAX_S = 0.1, 5.0  # ``eventually``: the first wait, doubled up to the longest


class InsufficientStorageError(ApiError):
    status, code = 507, "InsufficientStorageError"


def is_full(exc: BaseException) -> bool:
    """Is this the file system (or SQLite on it) saying there is no space left?"""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)


def for_want_of_space(exc: BaseException | None) -> bool:
    """``is_full`` of ``exc`` or of what caused it (a runtime's TaskStartError says why ``from`` the OSError)."""
    seen = 0
    while exc is not None and seen < 8:
        if is_full(exc):
            return True
        exc, seen = exc.__cause__, seen + 1
    return False


class Space:
    """Free space of the disk holding ``local``; the reserve and the submit floor (``floor_mb``)."""

    def __init__(self, local: Path, floor_mb: int = DEFAULT_FLOOR_MB, reserve_mb: int = RESERVE_MB) -> None:
        self.local, self.floor_mb, self.reserve_mb = local, floor_mb, reserve_mb
        self.reserve = local / RESERVE_NAME
        self._waits: dict[Hashable, float] = {}  # ``again``: what waits for room, and its last wait
        self._due: set[Hashable] = set()  # ... and which of those has its next try pending
        self._background: set[asyncio.Future[None]] = set()  # (``in_background``: held until done)

    def free_mb(self) -> float:
        st = os.statvfs(self.local)
        return st.f_bavail * st.f_frsize / 2**20

    def short(self) -> str | None:
        """Why submits are refused now (free space below the floor), or None."""
        free = self.free_mb()
        if free >= self.floor_mb:
            return None
        return (
            f"the disk holding {self.local} has {free:.0f} MB free, below the {self.floor_mb} MB the cluster "
            "keeps for running jobs' state and logs; free space there (pai delete finished jobs, whose logs "
            "stay on that disk) and submit again"
        )

    def error(self, what: str) -> InsufficientStorageError:
        return InsufficientStorageError(
            f"{what}: the disk holding {self.local} is full "
            f"({self.free_mb():.1f} MB free); free space there and try again"
        )

    def keep_reserve(self) -> None:
        """Make the reserve when there is room for it above the floor (at start, then every so often)."""
        if self.reserve.exists() or self.free_mb() < self.floor_mb + self.reserve_mb:
            return
        try:
            fd = os.open(self.reserve, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        try:
            os.posix_fallocate(fd, 0, self.reserve_mb << 20)
        except OSError:
            os.close(fd)
            self.reserve.unlink(missing_ok=True)
            return
        os.close(fd)

    def release(self) -> bool:
        """Give the reserve back to the file system; False when there was none left."""
        try:
            self.reserve.unlink()
        except FileNotFoundError:
            return False
        log.warning(
            "the disk holding %s is full: released the %d MB reserve so that tasks can still finish",
            self.local,
            self.reserve_mb,
        )
        return True

    def with_room(self, fn: Callable[[], T]) -> T:
        """``fn()``; when it fails for want of space, once more after releasing the reserve."""
        try:
            return fn()
        except Exception as exc:
            if not is_full(exc) or not self.release():
                raise
        return fn()

    async def eventually(self, fn: Callable[[], T], what: str) -> T:
        """``with_room(fn)``, tried again with backoff for as long as the disk stays full (an end that is not
        recorded holds its job RUNNING, its CPUs and memory until a restart); once it went through after a wait,
        the reserve is made again. Any other error is raised."""
        delay, waited = RETRY_FIRST_S, False
        while True:
            try:
                done = self.with_room(fn)
            except Exception as exc:
                if not is_full(exc):
                    raise
                if not waited:
                    log.warning("%s: the disk holding %s is full; trying again until there is space", what, self.local)
                waited = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            if waited:
                log.info("%s: recorded, now that the disk holding %s has space again", what, self.local)
                with contextlib.suppress(OSError):
                    self.keep_reserve()
            return done

    def in_background(self, fn: Callable[[], object], what: str) -> None:
        """``eventually(fn)`` in a task of its own, from a callback that cannot wait: a failure is logged."""

        async def later() -> None:
            try:
                await self.eventually(fn, what)
            except Exception:
                log.exception("%s failed", what)
            finally:
                self._background.discard(me)

        me = asyncio.ensure_future(later())
        self._background.add(me)

    def again(self, key: Hashable, fn: Callable[[], None], what: str) -> None:
        """Call ``fn`` from the event loop after a wait that doubles (RETRY_FIRST_S to RETRY_MAX_S) each time the
        same ``key`` asks again before ``went_through(key)``: a start the full disk refused, tried until there is
        room. One try per key is pending at a time."""
        if key in self._due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (no loop: nothing runs later; a daemon restart starts what waits)
            log.warning("%s: the disk holding %s is full", what, self.local)
            return
        delay = self._waits.get(key)
        if delay is None:
            log.warning("%s: the disk holding %s is full; trying again until there is space", what, self.local)
        delay = RETRY_FIRST_S if delay is None else min(delay * 2, RETRY_MAX_S)
        self._waits[key] = delay
        self._due.add(key)

        def due() -> None:
            self._due.discard(key)
            fn()

        loop.call_later(delay, due)

    def went_through(self, key: Hashable, what: str) -> None:
        """What ``again`` retried under ``key`` went through: forget its wait; make the reserve again."""
        if self._waits.pop(key, None) is not None:
            log.info("%s: done, now that the disk holding %s has space again", what, self.local)
            with contextlib.suppress(OSError):
                self.keep_reserve()

    def at_start(self) -> None:
        """Say it when the daemon starts short of space (it still starts: running tasks must be re-attached)."""
        with contextlib.suppress(OSError):
            why = self.short()
            if why is None:
                self.keep_reserve()
                return
            if self.reserve.exists() and self.free_mb() < self.reserve_mb:
                self.release()  # room for runtime.json and recording what ended meanwhile
            log.warning("starting short of space: %s (submits are refused until then)", why)
