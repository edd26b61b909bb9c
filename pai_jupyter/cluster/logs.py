"""Task log files: names, the 16 KiB tail, and following a file as it grows."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

LOG_NAMES = ("stdout", "stderr", "all")
TAIL_BYTES = 16 * 1024


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
    return data[cut + 1:] if 0 <= cut < len(data) - 1 else data


async def follow(path: Path, done: Callable[[], bool], *, start: int = 0, interval: float = 0.005,
                 check_every: float = 0.05, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
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
