"""``pai_jupyter.report(loss=0.3, step=5)``: a trial's metrics, from inside its task.

Each call appends one JSON line to ``$PAI_TASK_DIR/run/reports.jsonl`` (``common/reports.py``), the task's own
part of its directory, with no token or network needed: the daemon reads that file (without following links,
bounded) and serves it at ``GET /api/v2/local/jobs/{user}~{job}/reports`` beside what was posted there. Outside a
task (a script run by hand) the call checks its arguments and writes nothing. Imports only the standard library,
so a trial's Python needs nothing but this package.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ..common import reports as rep


def report(step: int | None = None, **metrics: float) -> dict[str, Any]:
    """Report metrics of this trial (``step`` orders them: curves, and Optuna's pruning); returns the record."""
    record = {"time": int(time.time() * 1000), "step": rep.check_step(step), "metrics": rep.check_metrics(metrics)}
    task_dir = os.environ.get("PAI_TASK_DIR")
    if task_dir:
        path = os.path.join(task_dir, rep.FILE)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())  # one write: whole lines
        finally:
            os.close(fd)
    return record
