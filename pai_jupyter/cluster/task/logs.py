"""Task log files: names, the 16 KiB tail, byte ranges read in chunks, following a file as it grows, and the
short-lived tokens that let a log location be fetched with no header (as OpenPAI's log manager's are)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

from ..runtime.taskdir import LOGS, RUNTIME_LOG

TAIL_BYTES = 16 * 1024
CHUNK = 64 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def log_names(task_dir: Path) -> tuple[str, ...]:
    """The logs a task offers: stdout, stderr, all, and runtime when the runtime wrote notices."""
    return LOGS + ((RUNTIME_LOG,) if (task_dir / RUNTIME_LOG).is_file() else ())


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


def read_chunks(path: Path, start: int, end: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """Bytes start..end (inclusive) of a file, ``chunk`` at a time: memory stays flat whatever the size."""
    with path.open("rb") as f:
        f.seek(start)
        left = end - start + 1
        while left > 0:
            data = f.read(min(chunk, left))
            if not data:
                return
            left -= len(data)
            yield data


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


def read_log(path: Path, *, tail: bool = False) -> bytes:
    """The whole file, or its last 16 KiB starting at a line boundary (so no UTF-8 sequence is cut)."""
    try:
        with path.open("rb") as f:
            if not tail:
                return f.read()
            f.seek(0, 2)
            size = f.tell()
            if size <= TAIL_BYTES:
                f.seek(0)
                return f.read()
            f.seek(size - TAIL_BYTES)
            data = f.read()
    except FileNotFoundError:
        return b""
    cut = data.find(b"\n")
    return data[cut + 1 :] if 0 <= cut < len(data) - 1 else data


async def follow(
    path: Path,
    done: Callable[[], bool],
    *,
    start: int = 0,
    interval: float = 0.005,
    check_every: float = 0.05,
    chunk: int = 64 * 1024,
) -> AsyncIterator[bytes]:
    """Yield new bytes of ``path`` as they are written, until ``done()`` and the file is drained.

    The file's size is polled every few milliseconds (cheap); ``done()`` (a database read) far less often."""
    offset = start
    last_check = 0.0
    while True:
        try:
            grown = os.stat(path).st_size > offset
        except FileNotFoundError:
            grown = False
        if grown:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read(chunk)
            offset += len(data)
            yield data
            continue
        now = time.monotonic()
        if now - last_check >= check_every:
            last_check = now
            if done():  # the task has ended, so its log is complete: drain what is left, then stop
                try:
                    if os.stat(path).st_size > offset:
                        continue
                except FileNotFoundError:
                    pass
                return
        await asyncio.sleep(interval)
