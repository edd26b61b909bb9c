"""Task log files: names, the 16 KiB tail, byte ranges read in chunks, following a file as it grows, and the
short-lived tokens that let a log location be fetched with no header (as OpenPAI's log manager's are).

Every read opens the log beneath its directory with ``safeio`` (no symlink followed, regular files only): on
Docker the logs are written by the container's shim into a directory the container can write, and even the
process runtime's root-written logs are read the same way, as a second line (docs/security.md)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

from ...common import safeio
from ..runtime.taskdir import ALL, LOGS, RUNTIME_LOG, STDERR

TAIL_BYTES = 16 * 1024
CHUNK = 64 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def log_names(logs_dir: Path) -> tuple[str, ...]:
    """The logs a task offers: stdout, stderr, all, and runtime when the runtime wrote notices."""
    return LOGS + ((RUNTIME_LOG,) if safeio.is_file_beneath(logs_dir, RUNTIME_LOG) else ())


def log_size(logs_dir: Path, name: str) -> int:
    """The log's size now (0 when it is not there yet, or is not a regular file)."""
    return safeio.size_beneath(logs_dir, name) or 0


LAST_LINE_BYTES = 4096  # how far back from a log's end its last line is looked for
LAST_LINE_CHARS = 300  # and how much of it a diagnosis quotes


def last_line(logs_dir: Path) -> str:
    """The last non-empty line of the task's ``stderr`` (else ``all``) within its last 4 KiB, control characters
    dropped and cut at 300 characters, or "": what a failure's diagnosis quotes when the runtime has no reason
    (a command that exited 1 said why there). Read with ``safeio`` (the task may have written the file)."""
    for name in (STDERR, ALL):
        size = safeio.size_beneath(logs_dir, name) or 0
        data = safeio.read_range(logs_dir, name, max(size - LAST_LINE_BYTES, 0), LAST_LINE_BYTES) if size else b""
        lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
        line = next((line for line in reversed(lines) if line), "")
        line = "".join(c for c in line if c.isprintable())
        if line:
            return line if len(line) <= LAST_LINE_CHARS else line[: LAST_LINE_CHARS - 1] + "…"
    return ""


class RangeError(ValueError):
    """A Range header that does not fit the file (HTTP 416)."""


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The (first, last) bytes a single-range ``Range`` header asks for; None for the whole file."""
    if not header:
        return None
    m = _RANGE.match(header.strip())
    if not m or m.groups() == ("", ""):
        raise RangeError(f"only one byte range is served (bytes=FIRST-LAST), not {header!r}")
    first, last = m.groups()
    if first == "":  # the last N bytes
        n = int(last)
        if n == 0:
            raise RangeError("an empty suffix range")
        return max(size - n, 0), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or start > end:
        raise RangeError(f"bytes {header.strip()[6:]} are outside the log's {size} bytes")
    return start, end


def read_chunks(logs_dir: Path, name: str, start: int, end: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """Bytes start..end (inclusive) of a log, ``chunk`` at a time: memory stays flat whatever the size."""
    try:
        with safeio.open_regular(logs_dir, name) as (fd, _st):
            at, left = start, end - start + 1
            while left > 0:
                data = os.pread(fd, min(chunk, left), at)
                if not data:
                    return
                at += len(data)
                left -= len(data)
                yield data
    except OSError:
        return


class LogSigner:
    """HMAC tokens, valid ``ttl`` seconds, each for one task attempt's logs (key: per daemon, in memory)."""

    def __init__(self, ttl: int = 600):
        self.ttl = ttl
        self._key = secrets.token_bytes(32)

    def _mac(self, scope: str, expires: int) -> str:
        return hmac.new(self._key, f"{scope}|{expires}".encode(), hashlib.sha256).hexdigest()[:32]

    def sign(self, scope: str) -> str:
        expires = int(time.time()) + self.ttl
        return f"{expires}.{self._mac(scope, expires)}"

    def check(self, scope: str, token: str) -> bool:
        expires, _, mac = token.partition(".")
        if not expires.isdigit() or len(expires) > 12 or int(expires) < time.time():
            return False
        return hmac.compare_digest(mac, self._mac(scope, int(expires)))


def read_log(logs_dir: Path, name: str, *, tail: bool = False) -> bytes:
    """The whole log, or its last 16 KiB starting at a line boundary (so no UTF-8 sequence is cut)."""
    try:
        with safeio.open_regular(logs_dir, name) as (fd, st):
            if not tail or st.st_size <= TAIL_BYTES:
                return b"".join(iter(lambda: os.read(fd, CHUNK), b""))
            data = os.pread(fd, TAIL_BYTES, st.st_size - TAIL_BYTES)
    except OSError:
        return b""
    cut = data.find(b"\n")
    return data[cut + 1 :] if 0 <= cut < len(data) - 1 else data


async def follow(
    logs_dir: Path,
    name: str,
    done: Callable[[], bool],
    *,
    start: int = 0,
    interval: float = 0.005,
    check_every: float = 0.05,
    chunk: int = 64 * 1024,
) -> AsyncIterator[bytes]:
    """Yield new bytes of log ``name`` as they are written, until ``done()`` and the file is drained.

    The log is opened once, safely, when it exists (the shim appends to it, never replaces it); then its size is
    polled every few milliseconds through that fd (cheap), ``done()`` (a database read) far less often."""
    offset = start
    last_check = 0.0
    fd: int | None = None
    try:
        while True:
            if fd is None:
                with contextlib.suppress(OSError):
                    fd = safeio.open_beneath(logs_dir, name)
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        os.close(fd)
                        return  # a FIFO or a device where a log should be: nothing to follow
            if fd is not None and os.fstat(fd).st_size > offset:
                data = os.pread(fd, chunk, offset)
                offset += len(data)
                yield data
                continue
            now = time.monotonic()
            if now - last_check >= check_every:
                last_check = now
                if done():  # the task has ended, so its log is complete: drain what is left, then stop
                    if fd is None:
                        with contextlib.suppress(OSError):
                            fd = safeio.open_beneath(logs_dir, name)
                    if fd is not None and stat.S_ISREG(os.fstat(fd).st_mode) and os.fstat(fd).st_size > offset:
                        continue
                    return
            await asyncio.sleep(interval)
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
