"""Runs left behind: updates a daemon had queued when it was killed (``kill -9``, a crash) never reached MLflow, so
a job that ended then would keep a run that says RUNNING or SCHEDULED forever. At each start, once the server
answers, the daemon asks MLflow (as its admin) for the platform's runs that are not over and sends each what its
job says now: the end (with the job's exit code and completion time), or RUNNING. A run whose job was deleted
meanwhile is ended KILLED with ``pai.state`` GONE. A sweep's parent run is left to its sweep's next state.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..core.store.tracking import jobs_of_runs
from .tracker import END_STATUS

if TYPE_CHECKING:
    from .tracker import Tracker

log = logging.getLogger("pai_jupyter.cluster")
PAGE = 1000
MAX_RUNS = 20_000


async def open_runs(tracker: Tracker) -> list[dict[str, Any]]:
    """The runs of the users' experiments (``pai/<user>``) whose status is RUNNING or SCHEDULED."""
    found = await tracker.call("POST", "experiments/search", {"filter": "name LIKE 'pai/%'", "max_results": PAGE})
    ids = [str(e["experiment_id"]) for e in found.get("experiments") or []]
    runs: list[dict[str, Any]] = []
    for status in ("RUNNING", "SCHEDULED"):
        token: str | None = None
        while ids and len(runs) < MAX_RUNS:
            body: dict[str, Any] = {"experiment_ids": ids, "filter": f"attributes.status = '{status}'"}
            page = await tracker.call(
                "POST", "runs/search", {**body, "max_results": PAGE, **({"page_token": token} if token else {})}
            )
            runs.extend(page.get("runs") or [])
            token = page.get("next_page_token")
            if not token:
                break
    return runs


async def reconcile(tracker: Tracker) -> int:
    """Send each open run what its job says now; the number of runs sent an update."""
    runs = await open_runs(tracker)
    jobs = jobs_of_runs(tracker.store, [str(r["info"]["run_id"]) for r in runs])
    sent = 0
    for r in runs:
        info = r["info"]
        tags = {t["key"]: t["value"] for t in (r.get("data") or {}).get("tags") or []}
        job_id = jobs.get(str(info["run_id"]))
        row = tracker.store.job_core(job_id) if job_id is not None else None
        if row is None:
            if "pai.job" in tags:  # (a sweep's parent has no pai.job)
                await tracker.call(
                    "POST", "runs/set-tag", {"run_id": info["run_id"], "key": "pai.state", "value": "GONE"}
                )
                await tracker.call("POST", "runs/update", {"run_id": info["run_id"], "status": "KILLED"})
                sent += 1
            continue
        if row["state"] in END_STATUS:
            tracker.changed(row, row["state"])
            sent += 1
        elif row["state"] == "RUNNING" and info.get("status") == "SCHEDULED":
            tracker.changed(row, "RUNNING")
            sent += 1
    if sent:
        log.info("MLflow runs brought up to their jobs' states after a restart: %d", sent)
    return sent


async def after_start(tracker: Tracker, wait_s: float = 600.0) -> None:
    """Once the server answers (its first start can take a while), ``reconcile``; a failure is logged."""
    try:
        if await tracker.wait_ready(wait_s):
            await reconcile(tracker)
    except Exception:
        log.exception("bringing MLflow runs up to their jobs' states failed")
