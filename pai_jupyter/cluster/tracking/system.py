"""A running job's CPU, memory and GPU use as its run's system metrics.

The samples are the ones the job page's charts show (``core/taskops.metrics``: the runtime's CPU and memory of each
task, NVML's GPUs), taken every ``PAI_JUPYTER_MLFLOW_SYSTEM_SECONDS`` (default 10, MLflow's own sampling interval;
0 turns them off) for each RUNNING job that has a run, and logged under MLflow's own names (``system/...``), so its
UI's "System metrics" tab shows them: CPU % (all tasks together, 100 per core), memory used (MB, and % of what the
job asked for) and, per GPU the job holds, its utilization and memory. The step is the seconds since the job was
submitted, so the curves of its attempts (and those sampled before a daemon restart) follow on.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from ..core import taskops
from ..core.store.tracking import run_of

if TYPE_CHECKING:
    from ..core.service import Cluster

log = logging.getLogger("pai_jupyter.cluster")
SYSTEM_ENV = "PAI_JUPYTER_MLFLOW_SYSTEM_SECONDS"
DEFAULT_SECONDS = 10
MB = 1 << 20


def interval() -> int:
    """Seconds between samples (``$PAI_JUPYTER_MLFLOW_SYSTEM_SECONDS``); 0: none are taken."""
    raw = os.environ.get(SYSTEM_ENV, "")
    try:
        return max(0, int(raw)) if raw else DEFAULT_SECONDS
    except ValueError:
        log.warning("%s=%r is not a whole number of seconds; sampling every %d s", SYSTEM_ENV, raw, DEFAULT_SECONDS)
        return DEFAULT_SECONDS


def system_values(sample: dict[str, Any]) -> dict[str, float]:
    """MLflow's system metrics from one ``taskops.metrics`` answer (the job's running tasks)."""
    tasks = [t for t in sample.get("tasks") or [] if t.get("state") == "RUNNING"]
    out: dict[str, float] = {}
    cpus = [t["cpuPercent"] for t in tasks if t.get("cpuPercent") is not None]
    if cpus:
        out["system/cpu_utilization_percentage"] = round(sum(cpus), 2)
    used = [t["memoryBytes"] for t in tasks if t.get("memoryBytes") is not None]
    if used:
        out["system/system_memory_usage_megabytes"] = round(sum(used) / MB, 2)
        limit = sum(t.get("memoryLimitBytes") or 0 for t in tasks if t.get("memoryBytes") is not None)
        if limit:
            out["system/system_memory_usage_percentage"] = round(100 * sum(used) / limit, 2)
    for t in tasks:
        for g in t.get("gpus") or []:
            i = g["index"]
            out[f"system/gpu_{i}_utilization_percentage"] = float(g["utilizationPercent"])
            out[f"system/gpu_{i}_memory_usage_megabytes"] = round(g["memoryUsedBytes"] / MB, 2)
            if g.get("memoryTotalBytes"):
                out[f"system/gpu_{i}_memory_usage_percentage"] = round(
                    100 * g["memoryUsedBytes"] / g["memoryTotalBytes"], 2
                )
    return out


class SystemMetrics:
    """Samples the running tracked jobs, one round at a time (a round still sampling skips the next tick)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.busy = False
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """A round in the background (it waits for CPU windows: not in the daemon's tick); none while one runs."""
        if not self.busy:
            self.busy = True
            self.task = asyncio.ensure_future(self.round())

    async def round(self) -> None:
        tracker = self.cluster.state.tracker
        self.busy = True
        try:
            if tracker is None:
                return
            for row in self.cluster.store.jobs_in_state("RUNNING"):
                job_id = row["id"]
                if run_of(self.cluster.store, job_id) is None:
                    continue
                try:
                    sample = await taskops.metrics(self.cluster, row)
                except Exception as exc:  # (a task that ended meanwhile, a runtime that cannot say)
                    log.debug("no system metrics for job %s: %s", job_id, exc)
                    continue
                values = system_values(sample)
                if values:
                    step = max(0, (int(sample["time"]) - int(row["submission_time"])) // 1000)
                    tracker.metrics(job_id, step, values, int(sample["time"]))
        except Exception:
            log.exception("sampling the running jobs' system metrics failed")
        finally:
            self.busy = False
