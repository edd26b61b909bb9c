"""How values read to a person, the same in the CLI, the notebook and HTML reprs: local times, one decimal,
short durations."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def fmt(value: Any, empty: str = "") -> str:
    if value is None:
        return empty
    if isinstance(value, datetime):
        return value.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def duration(seconds: float | None, empty: str = "-") -> str:
    """``42 s``, ``3m07s``, ``2h05m``."""
    if seconds is None:
        return empty
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
