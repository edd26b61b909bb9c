"""The TensorBoard of a task that has ended, started on demand by this server over the logdir the task's own
TensorBoard watched (as ``%tensorboard`` does for a finished run), so a job's TensorBoard button still works after
the job is done.

The cluster lists an ended task's ``tensorboard`` service with the ``logdir`` it watched, as the task saw it; where
that is a directory on this machine (the embedded cluster's process runtime) a TensorBoard subprocess serves it on
127.0.0.1, behind the same guard as a task's (it answers only with its token, which only this server holds: other
local users cannot read it), and the proxy reaches it like any task's service. It ends with this server (Linux:
PR_SET_PDEATHSIG) or after the registry's idle time.

A task's account can write parts of that path (the job's ``output/``, the Estimator's ``ml/``) and could put a link
there, to a directory of root's, after its TensorBoard ended. So the path is walked one name at a time without
following anything (``vet_logdir``): a link is followed only where no account but root (and this server's own) could
have made it, and the TensorBoard runs as the one other account that can change the path or the directory (a server
running as root never reads, as root, what another account could have pointed it at); a path two accounts could
change, or a directory others may write, is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import secrets
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.localserver import die_with_parent, free_port, serves
from .common import PaiHTTPError

START_TIMEOUT = 60.0
GUARD_MODULE = "pai_jupyter.common.tensorboard_guard"


@dataclass
class Board:
    """One started TensorBoard: where it listens, its token and process."""

    logdir: str
    port: int
    token: str
    proc: subprocess.Popen[bytes]
    last_used: float = field(default_factory=time.monotonic)


MAX_LINKS = 40  # as the kernel's own limit on links followed in one path


@dataclass(frozen=True)
class Logdir:
    """A logdir on this machine: its path with no link in it, and the account to read it as (None: this server's)."""

    path: Path
    run_as: tuple[int, int] | None


class LogdirRefused(ValueError):
    """The logdir is on this machine but this server does not serve it; the message says why."""


def _writers(parent: os.stat_result, entry: os.stat_result, name: Path) -> set[int]:
    """The accounts that can replace ``name`` (``entry``) in its directory (``parent``): the directory's owner,
    and the entry's in a sticky directory others may write (``/tmp``); anyone in one without the sticky bit."""
    if parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX:
        raise LogdirRefused(f"{name.parent} may be written by other accounts, which could replace {name.name}")
    return {parent.st_uid, entry.st_uid} if parent.st_mode & 0o022 else {parent.st_uid}


def _walk(logdir: str) -> tuple[Path, os.stat_result, set[int]] | None:
    """Where ``logdir`` leads, name by name with lstat (None: not a directory here), its stat, and every account
    that could change what the path leads to. A link is followed only where none but root and this server's own
    account could have made it."""
    ours = {0, os.geteuid()}
    writers: set[int] = set()
    names, here, links = list(Path(logdir).parts[1:]), Path("/"), 0
    try:
        st = os.lstat(here)
        while names:
            name = names.pop(0)
            if name == "..":  # (``here`` is a directory reached without a link: its parent is the real one)
                here = here.parent
                st = os.lstat(here)
                continue
            nxt = here / name
            entry = os.lstat(nxt)
            writers |= _writers(st, entry, nxt)
            if stat.S_ISLNK(entry.st_mode):
                if others := sorted(writers - ours):
                    raise LogdirRefused(
                        f"{logdir} goes through a link ({nxt}) that another account (uid {', '.join(map(str, others))})"
                        " could have made; this server does not follow it"
                    )
                links += 1
                if links > MAX_LINKS:
                    raise LogdirRefused(f"{logdir}: too many links")
                target = Path(os.readlink(nxt))
                names = list(target.parts[1:] if target.is_absolute() else target.parts) + names
                if target.is_absolute():
                    here, st = Path("/"), os.lstat("/")
                continue
            if not stat.S_ISDIR(entry.st_mode):
                return None
            here, st = nxt, entry
    except OSError:
        return None
    return here, st, writers | {st.st_uid}


def _tree_writers(top: Path) -> set[int]:
    """The accounts that own a directory beneath ``top`` (they could put a link in it); refused where others may
    write one. What TensorBoard would read as root must be root's all the way down."""
    found: set[int] = set()
    for parent, _dirs, _files in os.walk(top, followlinks=False):
        st = os.lstat(parent)
        if st.st_mode & 0o022:
            raise LogdirRefused(f"{parent} may be written by other accounts, so this server (root) does not serve it")
        found.add(st.st_uid)
    return found


def vet_logdir(logdir: Any) -> Logdir | None:
    """The logdir as a directory on this machine (None: a path inside a container, a ``name:path`` spec, a remote
    cluster's, or nothing there) and whom to read it as; LogdirRefused where a link on the way could be another
    account's, or more than one account could change what it holds."""
    if not isinstance(logdir, str) or not logdir.startswith("/") or "," in logdir:
        return None
    walked = _walk(logdir)
    if walked is None:
        return None
    path, st, writers = walked
    if os.geteuid() != 0:
        return Logdir(path, None)
    others = writers - {0} or _tree_writers(path) - {0}
    if len(others) > 1:
        raise LogdirRefused(f"{logdir} may be changed by more than one account (uids {sorted(others)})")
    if not others:
        return Logdir(path, None)
    uid = others.pop()
    try:
        gid = pwd.getpwuid(uid).pw_gid
    except KeyError:
        gid = st.st_gid
    return Logdir(path, (uid, gid))


def local_logdir(logdir: Any) -> Path | None:
    """The logdir's path on this machine when this server would serve it, else None."""
    try:
        found = vet_logdir(logdir)
    except LogdirRefused:
        return None
    return found.path if found is not None else None


class EndedBoards:
    """The TensorBoards this server started for ended tasks, by (job, role, index)."""

    def __init__(self) -> None:
        self.boards: dict[tuple[str, str, int], Board] = {}
        self.lock = asyncio.Lock()

    async def target(self, job: str, role: str, index: int, logdir: str | None) -> tuple[str, int, str]:
        """(host, port, token) of the TensorBoard over the ended task's logdir (as its service listed it), started
        first where needed; 409 where the logdir is not on this machine."""
        try:
            found = vet_logdir(logdir)
        except LogdirRefused as exc:
            raise PaiHTTPError(
                409,
                f"the task has ended and this server does not serve its TensorBoard's logs: {exc}",
                code="NotRunning",
            ) from None
        if found is None:
            raise PaiHTTPError(
                409,
                "the task has ended and the directory its TensorBoard watched is not on this machine "
                "(a container's or another host's path), so no TensorBoard can be started over it here",
                code="NotRunning",
            )
        key = (job, role, index)
        async with self.lock:
            board = self.boards.get(key)
            if board is None or board.proc.poll() is not None or board.logdir != str(found.path):
                board = await self._start(found)
                self.boards[key] = board
        board.last_used = time.monotonic()
        return "127.0.0.1", board.port, board.token

    async def _start(self, found: Logdir) -> Board:
        """Spawned from the event loop's thread (PR_SET_PDEATHSIG follows the spawning thread), then awaited; on
        another free port when another process took the first before TensorBoard bound it."""
        for _ in range(2):
            board = await self._start_on(found, free_port())
            if board is not None:
                return board
        raise PaiHTTPError(503, "the TensorBoard over the ended task's logs did not start", code="Starting")

    async def _start_on(self, found: Logdir, port: int) -> Board | None:
        """TensorBoard on ``port``; None when it ended before serving there (the port was taken meanwhile)."""
        path, run_as = found.path, found.run_as
        token = secrets.token_hex(24)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PAI_", "JUPYTER"))}
        env["PAI_SERVICE_TOKEN_TENSORBOARD"] = token
        argv = [sys.executable, "-m", GUARD_MODULE, "--logdir", str(path), "--host", "127.0.0.1"]
        proc = subprocess.Popen(
            [*argv, "--port", str(port), "--reload_interval", "30"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",
            preexec_fn=die_with_parent,
            user=run_as[0] if run_as else None,
            group=run_as[1] if run_as else None,
            extra_groups=[] if run_as else None,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not serves(proc.pid, port):
            if proc.poll() is not None:
                return None
            if time.monotonic() > deadline:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                raise PaiHTTPError(503, "the TensorBoard over the ended task's logs did not start", code="Starting")
            await asyncio.sleep(0.1)
        return Board(str(path), port, token, proc)

    def cull(self, idle: float) -> int:
        """Stop the TensorBoards unused for ``idle`` seconds; how many."""
        now = time.monotonic()
        gone = [k for k, b in self.boards.items() if now - b.last_used >= idle]
        for key in gone:
            self._stop(self.boards.pop(key))
        return len(gone)

    def touch(self, job: str, role: str, index: int) -> None:
        board = self.boards.get((job, role, index))
        if board is not None:
            board.last_used = time.monotonic()

    def close(self) -> None:
        for board in self.boards.values():
            self._stop(board)
        self.boards.clear()

    @staticmethod
    def _stop(board: Board) -> None:
        with contextlib.suppress(OSError):
            os.killpg(board.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            board.proc.wait(5)
