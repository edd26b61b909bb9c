"""Waiting in tests, in one place: poll a condition until a deadline instead of sleeping a fixed time (a fixed
sleep is either too short on a loaded machine or wasted time on an idle one)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

INTERVAL = 0.05
"""Seconds between two looks: short enough to add little to a test, long enough not to load the machine."""


def _message(what: str | Callable[[], str], timeout: float) -> str:
    text = what() if callable(what) else what
    return f"timed out after {timeout:g} s waiting for {text or 'the condition'}"


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float = 90,
    what: str | Callable[[], str] = "",
    interval: float = INTERVAL,
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that; AssertionError after ``timeout`` s.
    ``what`` names the condition in that error (a callable is asked at the time, e.g. for the last value seen)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(_message(what, timeout))
        time.sleep(interval)


async def async_wait_for(
    predicate: Callable[[], Awaitable[T | None]],
    timeout: float = 90,
    what: str | Callable[[], str] = "",
    interval: float = INTERVAL,
) -> T:
    """``wait_for`` for a test that runs on an event loop, with a coroutine function for ``predicate``: the loop
    keeps running between looks."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(_message(what, timeout))
        await asyncio.sleep(interval)
