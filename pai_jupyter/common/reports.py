"""What a trial reports (``pai_jupyter.report``) and where: one JSON line per call, ``{"time", "step", "metrics"}``,
appended to ``$PAI_TASK_DIR/run/reports.jsonl`` (the task's own part of its directory), which the daemon reads
safely and serves with the reports posted to ``/api/v2/local/jobs/{user}~{job}/reports``."""

from __future__ import annotations

import json
import math
from typing import Any

FILE = "run/reports.jsonl"  # beneath the task directory
MAX_METRICS = 64
MAX_NAME = 128


def check_metrics(metrics: Any) -> dict[str, float]:
    """The metrics as ``{name: finite float}``; ValueError says what is wrong."""
    if not isinstance(metrics, dict) or not metrics:
        raise ValueError("metrics must be a non-empty object of name: number")
    if len(metrics) > MAX_METRICS:
        raise ValueError(f"at most {MAX_METRICS} metrics per report")
    out: dict[str, float] = {}
    for name, value in metrics.items():
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
            raise ValueError(f"a metric name must be 1 to {MAX_NAME} characters, got {name!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"metric {name!r} must be a finite number, got {value!r}")
        out[name] = float(value)
    return out


def check_step(step: Any) -> int | None:
    if step is None:
        return None
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 2**53:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
    return step


def parse_lines(text: str) -> list[dict[str, Any]]:
    """The well-formed reports of a reports file; a malformed or partly written line is skipped."""
    out = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
            out.append(
                {
                    "time": int(item["time"]),
                    "step": check_step(item.get("step")),
                    "metrics": check_metrics(item.get("metrics")),
                }
            )
        except (ValueError, TypeError, KeyError, OverflowError):
            continue
    return out
