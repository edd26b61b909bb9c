"""How the cluster shares itself among its users, from ``cluster.yaml`` (docs/queue.md, "Sharing"):

- ``preemption``: the signal a preempted task gets (``TERM``), the grace before SIGKILL (30 s), at most how many
  times an hour one job is preempted (3), or ``enabled: false``. A job may set its own ``extras.preemption``.
- ``fairShare``: the half-life of the usage that orders users within a priority class (``halfLifeHours``, 24;
  0 turns fair share off: plain FIFO within a class).
- per-user quotas in a virtual cluster (``virtualClusters.<vc>.userQuota`` for every user, ``users.<name>`` for
  one; a top-level ``userQuota`` for virtual clusters without their own): GPUs, CPUs, memory and running jobs.
  With ``borrow: true`` a user over their quota may still run on room nobody within quota wants; such a job is the
  first to be preempted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...protocol import Job
from ...protocol.rules import PREEMPTION_KEY, RUNTIME_PLUGIN_KEY, preemption_problem
from ..paths import cluster_config
from .backfill import Res

INTERACTIVE_KEY = "com.pai_jupyter.interactive"
KERNEL_KEY = "com.pai_jupyter.kernel"  # what a PAI kernel's job carries (kernel/jobspec.py)
DEFAULT_GRACE_S = 30.0
DEFAULT_HALF_LIFE_S = 24 * 3600.0
DEFAULT_MAX_PER_HOUR = 3


def is_interactive(job: Job) -> bool:
    """A job someone works in (a kernel, an in-task Jupyter, a Hub server): GPU-idle release judges it
    (gpuidle.py), and its owner is told before it is preempted (shares.py)."""
    marked = job.extras.get(INTERACTIVE_KEY)
    if isinstance(marked, bool):
        return marked
    plugins = job.extras.get(RUNTIME_PLUGIN_KEY) or []
    jupyter = isinstance(plugins, list) and any(isinstance(p, dict) and p.get("plugin") == "jupyter" for p in plugins)
    return KERNEL_KEY in job.extras or jupyter


@dataclass(frozen=True)
class UserQuota:
    """One user's limits in a virtual cluster (None: no limit of that kind)."""

    cpu: int | None = None
    memory_mb: int | None = None
    gpu: int | None = None
    jobs: int | None = None

    def over(self, used: Res, running: int, want: Res) -> str | None:
        """Why ``want`` more would put its user over this quota (``used`` and ``running`` jobs held now), or None."""
        if self.jobs is not None and running + 1 > self.jobs:
            return f"{running} of {self.jobs} running jobs"
        for label, limit, have, more in (
            ("GPU", self.gpu, used[2], want[2]),
            ("CPU", self.cpu, used[0], want[0]),
            ("MB memory", self.memory_mb, used[1], want[1]),
        ):
            if limit is not None and have + more > limit:
                return f"{have} of {limit} {label} in use, this job needs {more}"
        return None

    def holds(self, used: Res) -> bool:
        """Whether ``used`` is within the quota (the running-jobs limit aside)."""
        limits = (self.cpu, self.memory_mb, self.gpu)
        return all(lim is None or have <= lim for lim, have in zip(limits, used, strict=True))


def _quota(spec: Any, where: str) -> UserQuota:
    if not isinstance(spec, dict):
        raise ValueError(f"{where} must be a mapping of gpu, cpu, memoryMB and jobs")
    unknown = sorted(set(spec) - {"gpu", "cpu", "memoryMB", "jobs"})
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (gpu, cpu, memoryMB, jobs)")
    values = {}
    for key, attr in (("gpu", "gpu"), ("cpu", "cpu"), ("memoryMB", "memory_mb"), ("jobs", "jobs")):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValueError(f"{where}.{key}: {value!r} must be a whole number, 0 or more")
        values[attr] = value
    return UserQuota(**values)


@dataclass(frozen=True)
class Sharing:
    grace_s: float = DEFAULT_GRACE_S
    signal: str = "TERM"
    max_per_hour: int = DEFAULT_MAX_PER_HOUR
    preempt: bool = True
    half_life_s: float = DEFAULT_HALF_LIFE_S  # 0: fair share off
    quotas: dict[str, dict[str, UserQuota]] = field(default_factory=dict)  # vc -> user ("*": everyone) -> quota
    borrow: dict[str, bool] = field(default_factory=dict)  # vc ("*": every other) -> may borrow idle room

    def quota(self, vc: str, user: str) -> UserQuota | None:
        mine = self.quotas.get(vc) or self.quotas.get("*") or {}
        return mine.get(user) or mine.get("*")

    def borrows(self, vc: str) -> bool:
        return self.borrow.get(vc, self.borrow.get("*", False))

    @property
    def has_quotas(self) -> bool:
        return any(self.quotas.values())

    def preemption_of(self, job: Job) -> tuple[float, str]:
        """The job's grace (seconds) and signal name: its ``extras.preemption``, else the cluster's."""
        own = job.extras.get(PREEMPTION_KEY)
        own = own if isinstance(own, dict) and preemption_problem(own) is None else {}
        grace = own.get("graceSeconds")
        return (float(grace) if grace is not None else self.grace_s, str(own.get("signal") or self.signal))

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> Sharing:
        """From cluster.yaml's mapping; raises ValueError naming the key that is wrong."""
        pre = data.get("preemption") or {}
        if not isinstance(pre, dict):
            raise ValueError("preemption must be a mapping")
        problem = preemption_problem({k: v for k, v in pre.items() if k in ("graceSeconds", "signal")})
        if problem:
            raise ValueError(f"preemption: {problem}")
        fair = data.get("fairShare") or {}
        hours = fair.get("halfLifeHours", DEFAULT_HALF_LIFE_S / 3600) if isinstance(fair, dict) else None
        if not isinstance(hours, (int, float)) or isinstance(hours, bool) or hours < 0:
            raise ValueError(f"fairShare.halfLifeHours: {hours!r} must be a number of hours (0: fair share off)")
        per_hour = pre.get("maxPerHour", DEFAULT_MAX_PER_HOUR)
        if not isinstance(per_hour, int) or per_hour < 0:
            raise ValueError(f"preemption.maxPerHour: {per_hour!r} must be a whole number")
        quotas: dict[str, dict[str, UserQuota]] = {}
        borrow: dict[str, bool] = {}
        scopes = [("*", data, "")] + [
            (str(vc), spec, f"virtualClusters.{vc}.")
            for vc, spec in (data.get("virtualClusters") or {}).items()
            if isinstance(spec, dict)
        ]
        for vc, spec, where in scopes:
            mine: dict[str, UserQuota] = {}
            if spec.get("userQuota") is not None:
                mine["*"] = _quota(spec["userQuota"], f"{where}userQuota")
            for user, q in (spec.get("users") or {}).items():
                mine[str(user)] = _quota(q, f"{where}users.{user}")
            if mine:
                quotas[vc] = mine
            if "borrow" in spec:
                if not isinstance(spec["borrow"], bool):
                    raise ValueError(f"{where}borrow must be true or false")
                borrow[vc] = spec["borrow"]
        return cls(
            grace_s=float(pre.get("graceSeconds", DEFAULT_GRACE_S)),
            signal=str(pre.get("signal", "TERM")),
            max_per_hour=per_hour,
            preempt=pre.get("enabled", True) is not False,
            half_life_s=float(hours) * 3600,
            quotas=quotas,
            borrow=borrow,
        )

    @classmethod
    def load(cls, local: Path) -> Sharing:
        """``local/cluster.yaml``'s, or the defaults; a wrong value stops the daemon with what is wrong."""
        data = cluster_config(local)
        try:
            return cls.from_config(data)
        except ValueError as exc:
            raise SystemExit(f"pai cluster: {local / 'cluster.yaml'}: {exc}") from None
