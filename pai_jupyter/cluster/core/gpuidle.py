"""GPU-idle release: an interactive job whose GPUs stayed under a utilisation for a while is warned, then stopped.

Interactive jobs hold GPUs while a person thinks; judged by GPU use (not HTTP traffic), one that left them idle
gives them back. A job is interactive when ``extras["com.pai_jupyter.interactive"]`` is true, or (unless that key
is false) it runs a PAI kernel (``com.pai_jupyter.kernel``) or the in-task ``jupyter`` runtime plugin. Batch
jobs are never judged. Off unless ``gpuIdle`` in ``local/cluster.yaml`` sets ``afterMinutes`` (docs/notebook-jobs.md),
and off on a runtime whose tasks hold other nodes' GPUs (Slurm).

Samples come from a sampler: GPU index -> utilisation percent. The default is NVML (``cluster/task/nvml.py``, the
metrics path's own); ``sampler: "module:function"`` names another (DCGM, or a test's fake). A GPU with no
sample is no evidence of idleness: the job's idle time starts again.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..paths import cluster_config
from ..runtime.taskdir import add_notice
from .sharing import is_interactive
from .store import loads

if TYPE_CHECKING:
    from .service import Cluster

log = logging.getLogger("pai_jupyter.cluster")

Sampler = Callable[[list[int]], dict[int, float]]


@dataclass
class GpuIdleConfig:
    """``gpuIdle:`` of local/cluster.yaml. ``after_minutes`` 0: off."""

    after_minutes: float = 0.0
    under_percent: float = 5.0
    warn_minutes: float = 5.0  # the warning comes this long before the stop
    every_seconds: float = 30.0
    sampler: str | None = None

    @property
    def enabled(self) -> bool:
        return self.after_minutes > 0

    @classmethod
    def load(cls, local: Path) -> GpuIdleConfig:
        path = local / "cluster.yaml"
        raw = cluster_config(local).get("gpuIdle") or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: gpuIdle must be a mapping (afterMinutes, underPercent, warnMinutes, ...)")
        known = {
            "afterMinutes": "after_minutes",
            "underPercent": "under_percent",
            "warnMinutes": "warn_minutes",
            "everySeconds": "every_seconds",
        }
        unknown = set(raw) - set(known) - {"sampler"}
        if unknown:
            raise ValueError(f"{path}: gpuIdle: unknown keys {sorted(unknown)}; known: {sorted([*known, 'sampler'])}")
        values: dict[str, Any] = {}
        for key, attr in known.items():
            if key in raw:
                value = raw[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise ValueError(f"{path}: gpuIdle.{key} must be a number >= 0, not {value!r}")
                values[attr] = float(value)
        if raw.get("sampler") is not None:
            values["sampler"] = str(raw["sampler"])
        config = cls(**values)
        config.every_seconds = max(config.every_seconds, 1.0)
        return config


def nvml_sampler() -> Sampler:
    from ..task.nvml import Nvml

    nvml = Nvml()
    return lambda indices: {i: s.utilization_percent for i, s in nvml.sample(indices).items()}


def load_sampler(spec: str | None) -> Sampler:
    """NVML, or the callable ``module:function`` names."""
    if not spec:
        return nvml_sampler()
    module, _, name = spec.partition(":")
    fn = getattr(importlib.import_module(module), name or "sample")
    if not callable(fn):
        raise ValueError(f"gpuIdle.sampler {spec} is not callable")
    return fn  # type: ignore[no-any-return]


@dataclass
class _Idle:
    since: float
    warned: bool = False


@dataclass
class GpuIdle:
    """Judges the running interactive jobs that hold GPUs, one sample at a time (the daemon's tick calls it)."""

    cluster: Cluster
    config: GpuIdleConfig
    sampler: Sampler
    idle: dict[int, _Idle] = field(default_factory=dict)  # job id -> since when its GPUs have been idle

    def watched(self) -> dict[int, list[int]]:
        """Job id -> the GPU indices of its running tasks, for the running interactive jobs that hold any."""
        out: dict[int, list[int]] = {}
        for row in self.cluster.store.jobs_in_state("RUNNING"):
            if row["execution_type"] == "STOP" or not is_interactive(self.cluster.job_model(row)):
                continue
            gpus = [
                int(g)
                for t in self.cluster.store.tasks(row["id"], row["attempt"])
                if t["state"] == "RUNNING"
                for g in (loads(t["gpus"], []) or [])
            ]
            if gpus:
                out[row["id"]] = gpus
        return out

    def sample(self, watched: dict[int, list[int]]) -> dict[int, float]:
        """The sampler's answer for every GPU a watched job holds (called off the event loop)."""
        indices = sorted({g for gpus in watched.values() for g in gpus})
        return self.sampler(indices) if indices else {}

    def judge(self, watched: dict[int, list[int]], samples: dict[int, float], now: float | None = None) -> None:
        """Warn or stop each watched job by how long all its GPUs have been under the threshold."""
        now = time.time() if now is None else now
        for gone in set(self.idle) - set(watched):
            del self.idle[gone]
        after = self.config.after_minutes * 60
        warn_at = max(self.config.after_minutes - self.config.warn_minutes, 0) * 60
        for job_id, gpus in watched.items():
            values = [samples.get(g) for g in gpus]
            if any(v is None or v >= self.config.under_percent for v in values):
                self.idle.pop(job_id, None)
                continue
            state = self.idle.setdefault(job_id, _Idle(now))
            idle_for = now - state.since
            row = self.cluster.store.job_core(job_id)
            if row is None or row["state"] != "RUNNING":
                continue
            if idle_for >= after:
                self.idle.pop(job_id, None)
                self.cluster.stop(row, self._stop_reason())
            elif idle_for >= warn_at and not state.warned:
                state.warned = True
                self._warn(job_id, row["attempt"], after - idle_for)

    def _stop_reason(self) -> str:
        c = self.config
        return (
            f"stopped: an interactive job whose GPUs stayed under {c.under_percent:g}% utilisation for "
            f"{c.after_minutes:g} minutes (the cluster's gpuIdle setting gives idle GPUs back)"
        )

    def _warn(self, job_id: int, attempt: int, left_s: float) -> None:
        c = self.config
        message = (
            f"the job's GPUs have been under {c.under_percent:g}% utilisation; it will be stopped in "
            f"{max(left_s, 0) / 60:.1f} minutes unless they are used (gpuIdle: {c.after_minutes:g} minutes)"
        )
        with self.cluster.store.tx():
            self.cluster.store.add_event(job_id, "Warning", "GpuIdle", message)
        for t in self.cluster.store.tasks(job_id, attempt):
            if t["state"] == "RUNNING" and t["task_dir"]:
                try:
                    add_notice(Path(t["task_dir"]), f"[pai_jupyter] warning: {message}\n")
                except OSError as exc:
                    log.warning("gpuIdle: could not write the warning into %s: %s", t["task_dir"], exc)

    async def check(self) -> None:
        watched = self.watched()
        if not watched:
            self.idle.clear()
            return
        samples = await asyncio.to_thread(self.sample, watched)
        self.judge(watched, samples)


def gpu_idle(cluster: Cluster, local: Path) -> GpuIdle | None:
    """The daemon's watcher, or None when gpuIdle is off."""
    config = GpuIdleConfig.load(local)
    if not config.enabled:
        return None
    if not cluster.runtime.local_gpus:  # a sampler gets GPU indices, not nodes: it would judge this machine's GPUs
        log.warning("gpuIdle is off: the %s runtime's tasks hold GPUs of other nodes", cluster.runtime.name)
        return None
    log.info(
        "gpuIdle: interactive jobs with GPUs under %g%% for %g minutes are stopped",
        config.under_percent,
        config.after_minutes,
    )
    return GpuIdle(cluster, config, load_sampler(config.sampler))
