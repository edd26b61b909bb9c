"""Task log files: names, the 16 KiB tail, and following a file as it grows."""

from __future__ import annotations

import asyncio
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


async def follow(path: Path, done: Callable[[], bool], *, start: int = 0, interval: float = 0.01,
                 chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
    """Yield new bytes of ``path`` as they are written, until ``done()`` and the file is drained."""
    offset = start
    idle = interval
    while True:
        finished = done()  # read before the file so the last bytes written before the end are not missed
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read(chunk)
        except FileNotFoundError:
            data = b""
        if data:
            offset += len(data)
            idle = interval
            yield data
            continue
        if finished:
            return
        await asyncio.sleep(idle)
        idle = min(idle * 1.5, 0.05)
