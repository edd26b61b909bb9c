"""``pai_jupyter.report(loss=0.3, step=5)``: a trial's metrics, from inside its task.

Each call appends one JSON line to ``$PAI_TASK_DIR/run/reports.jsonl`` (``common/reports.py``), the task's own
part of its directory, with no token or network needed: the daemon reads that file (without following links,
bounded) and serves it at ``GET /api/v2/local/jobs/{user}~{job}/reports`` beside what was posted there. Where the
job is an MLflow run (``PAI_MLFLOW_RUN_ID`` and the tracking server in the task's environment: cluster/tracking/), the
metrics go into that run too, with their step. Outside a task (a script run by hand) the call checks its arguments
and writes nothing. Imports only the standard library, so a trial's Python needs nothing but this package.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ..common import reports as rep

RUN_ID = "PAI_MLFLOW_RUN_ID"  # the job's run (MLFLOW_RUN_ID too, which mlflow's client removes once it has used it)


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
    if os.environ.get(RUN_ID) and os.environ.get("MLFLOW_TRACKING_URI"):
        _to_mlflow(record)
    return record


def _to_mlflow(record: dict[str, Any]) -> None:
    """Log the record's metrics into the job's MLflow run (its REST API, with the credentials the platform gave the
    task); a refusal or an unreachable server is said on stderr, never raised: the report is in its file."""
    import base64
    import sys
    import urllib.error
    import urllib.request

    body = {
        "run_id": os.environ[RUN_ID],
        "metrics": [
            {"key": k, "value": v, "timestamp": record["time"], "step": record["step"] or 0}
            for k, v in record["metrics"].items()
        ],
    }
    request = urllib.request.Request(
        os.environ["MLFLOW_TRACKING_URI"].rstrip("/") + "/api/2.0/mlflow/runs/log-batch",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
    except (urllib.error.URLError, OSError) as exc:
        print(f"pai_jupyter.report: the job's MLflow run did not take these metrics: {exc}", file=sys.stderr)
