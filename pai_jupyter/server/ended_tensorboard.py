"""The TensorBoard of a task that has ended, started on demand by this server over the logdir the task's own
TensorBoard watched (as ``%tensorboard`` does for a finished run), so a job's TensorBoard button still works after
the job is done.

The cluster lists an ended task's ``tensorboard`` service with the ``logdir`` it watched, as the task saw it; where
that is a directory on this machine (the embedded cluster's process runtime) a TensorBoard subprocess serves it on
127.0.0.1, behind the same guard as a task's (it answers only with its token, which only this server holds: other
local users cannot read it), and the proxy reaches it like any task's service. It ends with this server (Linux:
PR_SET_PDEATHSIG) or after the registry's idle time. A server running as root never reads a directory a task could
write as root: the TensorBoard runs as the directory's owner (a symlink is refused), so it can read no more than
the task could.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.localserver import answers, die_with_parent, free_port
from .common import PaiHTTPError

START_TIMEOUT = 60.0
GUARD_MODULE = "pai_jupyter.server.tensorboard_guard"


@dataclass
class Board:
    """One started TensorBoard: where it listens, its token and process."""

    logdir: str
    port: int
    token: str
    proc: subprocess.Popen[bytes]
    last_used: float = field(default_factory=time.monotonic)


def local_logdir(logdir: Any) -> Path | None:
    """The logdir as a real directory on this machine (no symlink at its end), else None (a path inside a
    container, ``name:path`` specs, a remote cluster)."""
    if not isinstance(logdir, str) or not logdir.startswith("/") or "," in logdir:
        return None
    path = Path(logdir)
    try:
        st = path.lstat()
    except OSError:
        return None
    return path if stat.S_ISDIR(st.st_mode) else None


def _run_as(path: Path) -> tuple[int, int] | None:
    """(uid, gid) to drop to: the directory's owner when this server is root and does not own it. A root-owned
    directory that others may write (``/tmp``) is refused: root would follow what they put there."""
    if os.geteuid() != 0:
        return None
    st = path.lstat()
    if st.st_uid != 0:
        return st.st_uid, st.st_gid
    if st.st_mode & 0o022:
        raise PaiHTTPError(
            409,
            "the directory the ended task's TensorBoard watched may be written by other accounts, so this server "
            "(root) does not serve it",
            code="NotRunning",
        )
    return None


class EndedBoards:
    """The TensorBoards this server started for ended tasks, by (job, role, index)."""

    def __init__(self) -> None:
        self.boards: dict[tuple[str, str, int], Board] = {}
        self.lock = asyncio.Lock()

    async def target(self, job: str, role: str, index: int, item: dict[str, Any]) -> tuple[str, int, str]:
        """(host, port, token) of the TensorBoard over the ended task's logdir, started first where needed; 409
        where the logdir is not on this machine."""
        path = local_logdir(item.get("logdir"))
        if path is None:
            raise PaiHTTPError(
                409,
                "the task has ended and the directory its TensorBoard watched is not on this machine "
                "(a container's or another host's path), so no TensorBoard can be started over it here",
                code="NotRunning",
            )
        key = (job, role, index)
        async with self.lock:
            board = self.boards.get(key)
            if board is None or board.proc.poll() is not None or board.logdir != str(path):
                board = await self._start(path)
                self.boards[key] = board
        board.last_used = time.monotonic()
        return "127.0.0.1", board.port, board.token

    async def _start(self, path: Path) -> Board:
        """Spawned from the event loop's thread (PR_SET_PDEATHSIG follows the spawning thread), then awaited."""
        run_as = _run_as(path)
        port, token = free_port(), secrets.token_hex(24)
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
        while not answers(port):
            if proc.poll() is not None or time.monotonic() > deadline:
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
