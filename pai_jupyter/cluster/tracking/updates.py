"""What the tracker's worker sends MLflow for a queued update (``Tracker._work``): a run's status and tags, its
metrics, an ended job's artifacts and the backfill of its reports, and a sweep's parent run. One update at a time,
in order; each is a few calls of MLflow's REST API as its admin."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ...common.sweepstate import best_trial
from ..core.jobreports import reported
from ..core.store.tracking import TrackedRun, run_of, save_sweep_run, sweep_run
from . import artifacts
from .artifacts import budget_bytes
from .errors import TrackingError, error_code
from .runinfo import param_value, sweep_params, sweep_tags

if TYPE_CHECKING:
    from .tracker import Tracker


async def backfill(tracker: Tracker, run: TrackedRun, job_id: int, attempts: int) -> None:
    """Every report the daemon holds for the ended job, logged into its run again: MLflow keeps one point of
    each (key, step, time, value), so only those it missed (its server was down when the task sent them) are
    added, and the run holds what the Sweeps page shows."""
    metrics = [
        {"key": str(k)[:250], "value": float(v), "timestamp": int(r["time"]), "step": int(r.get("step") or 0)}
        for r in reported(tracker.store, job_id, attempts)
        for k, v in (r.get("metrics") or {}).items()
    ]
    for i in range(0, len(metrics), 1000):  # MLflow takes 1000 metrics per batch
        await tracker.call("POST", "runs/log-batch", {"run_id": run.run_id, "metrics": metrics[i : i + 1000]})


async def send(tracker: Tracker, run: TrackedRun, job_id: int, kind: str, what: dict[str, Any]) -> None:
    """One queued update of job ``job_id``'s run: its status and tags, metrics, artifacts, or the backfill."""
    if kind == "backfill":
        await backfill(tracker, run, job_id, what["attempts"])
    elif kind == "artifacts":
        await upload_artifacts(tracker, run, what["base"], what["outputs"])
    elif kind == "update":
        tags = [{"key": k, "value": v} for k, v in what.pop("tags", {}).items()]
        if tags:
            await tracker.call("POST", "runs/log-batch", {"run_id": run.run_id, "tags": tags})
        await tracker.call("POST", "runs/update", {"run_id": run.run_id, **what})
    else:
        metrics = [
            {"key": str(k)[:250], "value": float(v), "timestamp": what["time"], "step": int(what["step"])}
            for k, v in what["metrics"].items()
        ]
        for i in range(0, len(metrics), 1000):  # MLflow takes 1000 metrics per batch
            await tracker.call("POST", "runs/log-batch", {"run_id": run.run_id, "metrics": metrics[i : i + 1000]})


async def upload_artifacts(tracker: Tracker, run: TrackedRun, base: Path, outputs: dict[str, str]) -> None:
    """Upload what of ``outputs`` fits (``artifacts.py``) through the server's artifact API, as its admin; the
    run's ``pai.artifacts`` tag says what was uploaded and what was left out."""
    found = await asyncio.to_thread(artifacts.listing, base, outputs, budget_bytes())
    info = (await tracker.call("GET", "runs/get", run_id=run.run_id))["run"]["info"]
    root = str(info.get("artifact_uri") or "").removeprefix("mlflow-artifacts:").lstrip("/")
    if not root:
        raise TrackingError(0, "NO_ARTIFACT_ROOT", f"the run's artifact_uri is {info.get('artifact_uri')!r}")
    for name, path, size in found.files:
        data = await asyncio.to_thread(artifacts.read, base, path, size)
        inside = f"outputs/{name}/{path[len(outputs[name]) + 1 :]}"
        r = await tracker.http.put(f"/api/2.0/mlflow-artifacts/artifacts/{quote(root)}/{quote(inside)}", content=data)
        if r.status_code >= 400:
            raise TrackingError(r.status_code, error_code(r), r.text[:300])
    tag = {"key": "pai.artifacts", "value": artifacts.summary(found)}
    await tracker.call("POST", "runs/log-batch", {"run_id": run.run_id, "tags": [tag]})


async def sweep(tracker: Tracker, user: str, sweep: str, trials: list[int], state: dict[str, Any]) -> None:
    """The sweep's parent run (made with its first trials: the search as params, Optuna's study as tags), its
    trials' runs made its children, and at the end its best trial and FINISHED."""
    parent = sweep_run(tracker.store, user, sweep)
    if parent is None and not trials:
        return
    if parent is None:
        tags = {"mlflow.user": user, "mlflow.runName": sweep, "pai.user": user, **sweep_tags(user, sweep, state)}
        made = await tracker.call(
            "POST",
            "runs/create",
            {
                "experiment_id": await tracker.experiment_of(user),
                "user_id": user,
                "run_name": sweep,
                "start_time": int(time.time() * 1000),
                "tags": [{"key": k, "value": v} for k, v in tags.items()],
            },
        )
        parent = str(made["run"]["info"]["run_id"])
        with tracker.store.tx():
            save_sweep_run(tracker.store, user, sweep, parent)
        params = [{"key": k, "value": param_value(v)} for k, v in sweep_params(state).items()]
        await tracker.call("POST", "runs/log-batch", {"run_id": parent, "params": params[:100]})
    numbers = {str(t.get("job")): t.get("number") for t in state.get("trials") or []}
    for job_id in trials:
        run = run_of(tracker.store, job_id)
        row = tracker.store.job_core(job_id)
        if run is not None and row is not None:
            tags = {"mlflow.parentRunId": parent, "pai.sweep": f"{user}~{sweep}"}
            if (number := numbers.get(f"{row['user']}~{row['name']}")) is not None:
                tags["pai.trial"] = str(number)
            batch = [{"key": k, "value": v} for k, v in tags.items()]
            await tracker.call("POST", "runs/log-batch", {"run_id": run.run_id, "tags": batch})
    done = state.get("status") == "done"
    if done and (best := best_trial(state)) is not None:
        metric = {"key": f"best_{state.get('objective') or 'value'}"[:250], "value": float(best["value"])}
        now = int(time.time() * 1000)
        best_tag = {"key": "pai.sweep.best", "value": str(best.get("job"))}
        result = {"run_id": parent, "metrics": [{**metric, "timestamp": now, "step": 0}], "tags": [best_tag]}
        await tracker.call("POST", "runs/log-batch", result)
    update = {"run_id": parent, "status": "FINISHED" if done else "RUNNING"}
    await tracker.call("POST", "runs/update", {**update, **({"end_time": int(time.time() * 1000)} if done else {})})
