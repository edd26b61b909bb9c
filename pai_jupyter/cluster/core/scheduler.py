"""Resource accounting for the embedded cluster: machine capacity, virtual-cluster quotas, GPU indices, ports.

Pure bookkeeping (no I/O besides probing ports), so the queueing rules are easy to test: FIFO by submission
time within a virtual cluster, gang allocation by default, and a reason for every job that waits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Resources:
    cpu: int = 0
    memory_mb: int = 0
    gpu: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory_mb + other.memory_mb, self.gpu + other.gpu)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory_mb - other.memory_mb, self.gpu - other.gpu)

    def fits_in(self, room: Resources) -> bool:
        return self.cpu <= room.cpu and self.memory_mb <= room.memory_mb and self.gpu <= room.gpu

    def shortfall(self, room: Resources) -> str | None:
        """The first resource that does not fit, in words: 'needs 2 GPU, 0 free'."""
        for label, want, have in (
            ("CPU", self.cpu, room.cpu),
            ("GPU", self.gpu, room.gpu),
            ("MB memory", self.memory_mb, room.memory_mb),
        ):
            if want > have:
                return f"needs {want} {label}, {max(have, 0)} free"
        return None

    def describe(self) -> str:
        return f"{self.cpu} CPU, {self.memory_mb} MB memory, {self.gpu} GPU"


def machine_resources() -> Resources:
    """CPUs, memory and NVML GPUs of this machine (0 GPUs without NVML)."""
    import psutil

    return Resources(os.cpu_count() or 1, psutil.virtual_memory().total // (1024 * 1024), gpu_count())


def gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVMLError_LibraryNotFound and friends: no GPU here
        return 0


@dataclass
class Capacity:
    """What the cluster has, what each virtual cluster may use, and what is in use now."""

    total: Resources
    quotas: dict[str, Resources] = field(default_factory=dict)
    used: Resources = field(default_factory=Resources)
    used_by_vc: dict[str, Resources] = field(default_factory=dict)
    free_gpus: list[int] = field(default_factory=list)
    nodes: list[Resources] = field(default_factory=list)  # a batch system's machines: one task must fit one

    def __post_init__(self) -> None:
        self.quotas.setdefault("default", self.total)
        if not self.free_gpus:
            self.free_gpus = list(range(self.total.gpu))

    def room(self, vc: str) -> Resources:
        """Free resources for a VC: the smaller of its quota's rest and the machine's rest."""
        quota_left = self.quotas[vc] - self.used_by_vc.get(vc, Resources())
        machine_left = self.total - self.used
        return Resources(
            min(quota_left.cpu, machine_left.cpu),
            min(quota_left.memory_mb, machine_left.memory_mb),
            min(quota_left.gpu, machine_left.gpu, len(self.free_gpus)),
        )

    def never_fits(self, vc: str, tasks: list[Resources], gang: bool) -> str | None:
        """Why a job could never run here, or None. Checked at submit so it is refused, not queued forever."""
        if vc not in self.quotas:
            return f"virtual cluster {vc!r} does not exist (known: {', '.join(sorted(self.quotas))})"
        limit = Resources(
            min(self.quotas[vc].cpu, self.total.cpu),
            min(self.quotas[vc].memory_mb, self.total.memory_mb),
            min(self.quotas[vc].gpu, self.total.gpu),
        )
        for t in tasks:
            if not t.fits_in(limit):
                return f"a task needs {t.describe()} but virtual cluster {vc!r} has {limit.describe()} in all"
            if self.nodes and not any(t.fits_in(n) for n in self.nodes):
                return f"a task needs {t.describe()}, more than one node has ({self._node_sizes()})"
        if gang:
            whole = sum(tasks, Resources())
            if not whole.fits_in(limit):
                return (
                    f"the job needs {whole.describe()} at once (gang allocation) but virtual cluster {vc!r} "
                    f"has {limit.describe()} in all; set extras.gangAllocation: false to run tasks as they fit"
                )
        return None

    def _node_sizes(self) -> str:
        sizes = sorted(set(self.nodes), key=lambda n: (n.memory_mb, n.cpu, n.gpu), reverse=True)
        said = "; ".join(n.describe() for n in sizes[:3]) + ("; …" if len(sizes) > 3 else "")
        return f"each of its {len(self.nodes)} nodes has {said}" if len(sizes) == 1 else f"its nodes have {said}"

    def take(self, vc: str, demand: Resources, gpus: list[int] | None = None) -> list[int]:
        """Reserve a task's resources; returns the GPU indices it gets (``gpus``: the ones it already has)."""
        if gpus is None:
            gpus, self.free_gpus = self.free_gpus[: demand.gpu], self.free_gpus[demand.gpu :]
        else:
            self.free_gpus = [g for g in self.free_gpus if g not in gpus]
        self.used = self.used + demand
        self.used_by_vc[vc] = self.used_by_vc.get(vc, Resources()) + demand
        return gpus

    def give_back(self, vc: str, demand: Resources, gpus: list[int]) -> None:
        self.used = self.used - demand
        self.used_by_vc[vc] = self.used_by_vc.get(vc, Resources()) - demand
        self.free_gpus = sorted(set(self.free_gpus) | set(gpus))
