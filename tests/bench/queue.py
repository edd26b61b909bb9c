"""P18: one scheduling pass (``Cluster.schedule``: the queue read, the plan of core/backfill.py, the heads' reasons
written) over 10,000 waiting jobs, in-process with the in-memory runtime of the scheduler tests: the pass that
every submit, task end and stop runs. A running job holds 7 of the 8 CPUs and every waiting job needs 2 to 4, so
no job can start and each pass weighs all 10,000 against the free CPU and the reservation of its line's head;
half the jobs give a max run time (backfill candidates), a fifth ask for a priority class. The running job is of the
highest class, so nothing can be preempted, but the pass weighs preemption and fair share (one user: nothing to
reorder). Baseline: the pure plan alone on the same queues.

P18F: the same with the jobs of 100 users, a per-user quota every user is within and fair share reordering the line
on each pass (core/shares.py), against P18's pass of one user."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

from pai_jupyter.cluster.core.backfill import Busy, plan
from pai_jupyter.cluster.core.scheduler import Capacity, Resources
from pai_jupyter.cluster.core.service import Cluster
from pai_jupyter.cluster.core.sharing import Sharing, UserQuota
from tests.helpers.memory_cluster import MemoryRuntime

from .common import Figure, median, ratio

JOBS = 10_000
PASSES = 21
TARGET_MS = 20.0
COLD_TARGET_MS = 200.0  # was ~6.5 s when each job's model was parsed
CLASSES = ("prod", "test", "oppo", "crit")


def _job(name: str, cpu: int, extras: dict[str, object]) -> bytes:
    role = {"name": "main", "taskNumber": 1, "cpuNumber": cpu, "memoryMB": 256, "gpuNumber": 0, "command": "true"}
    return json.dumps({"jobName": name, "image": "img", "taskRoles": [role], "extras": extras}).encode()


async def _measure(local: Path, users: int = 1) -> tuple[list[float], list[float], float, float]:
    sharing = Sharing(quotas={"*": {"*": UserQuota(cpu=1_000)}}) if users > 1 else None
    cluster = Cluster(local, MemoryRuntime(), Capacity(Resources(8, 65536, 0)), stop_grace=0.0, sharing=sharing)
    try:
        crit = {"hivedScheduler": {"jobPriorityClass": "crit"}}  # (nothing may preempt it)
        cluster.submit("bench", _job("blocker", 7, crit))  # holds 7 CPUs until the end
        for _ in range(5):  # (its start is recorded on the loop's next turns, not after the store is closed)
            await asyncio.sleep(0)
        t0 = time.perf_counter()
        schedule = cluster.schedule
        cluster.schedule = lambda: None  # type: ignore[method-assign]  # (each submit's pass: 10,000 of them, ~2 min)
        try:
            with cluster.store.tx():  # (one transaction: the setup, not the figure)
                for i in range(JOBS):
                    extras: dict[str, object] = {"maxRunTimeMinutes": 30} if i % 2 else {}
                    if i % 5 == 0:
                        extras["hivedScheduler"] = {"jobPriorityClass": CLASSES[i // 5 % len(CLASSES)]}
                    cluster.submit(f"user{i % users}" if users > 1 else "bench", _job(f"w{i}", 2 + i % 3, extras))
        finally:
            cluster.schedule = schedule  # type: ignore[method-assign]
        setup = time.perf_counter() - t0
        assert len(cluster.queue.ids("default")) == JOBS, "the jobs should all be waiting"
        cluster.queue.info.clear()  # a cold pass first: every job's view read from the store (after a restart)
        cluster.state.models.clear()  # (and no parsed model cached)
        t0 = time.perf_counter()
        cluster.schedule()
        cold = time.perf_counter() - t0
        passes, pure = [], []
        for _ in range(PASSES):
            t0 = time.perf_counter()
            cluster.schedule()
            passes.append(time.perf_counter() - t0)
        if users > 1:
            assert cluster.queue.fair, "fair share should reorder the line"
        queues = {"default": [cluster.queue.info[j] for j in cluster.queue.ids("default")]}
        busy = [Busy(b["vc"], (b["cpu"], b["memory_mb"], b["gpu"]), b["deadline"]) for b in cluster.store.busy_tasks()]
        cap = cluster.capacity
        total = (cap.total.cpu, cap.total.memory_mb, cap.total.gpu)
        quotas = {vc: (q.cpu, q.memory_mb, q.gpu) for vc, q in cap.quotas.items()}
        for _ in range(PASSES):
            t0 = time.perf_counter()
            result = plan(time.time(), total, quotas, busy, queues)
            pure.append(time.perf_counter() - t0)
        assert not result.starts, "no waiting job fits the one free CPU"
        return passes, pure, cold, setup
    finally:
        cluster.spawner.shutdown(wait=False)
        cluster.store.close()


Measured = tuple[list[float], list[float], float, float]
_for_p18c: list[Measured] = []  # what this round's P18 measured, for its P18C


def _measured(*, shared: bool = False) -> Measured:
    """A fresh set-up and measurement (10,000 submits take a while): P18 makes one each round and leaves it for
    the round's P18C (``shared``), so every round's figures are measured anew, never repeated."""
    if shared and _for_p18c:
        return _for_p18c.pop()
    with tempfile.TemporaryDirectory(prefix="pai-bench-p18-") as tmp:
        result = asyncio.run(_measure(Path(tmp) / "local"))
    if not shared:
        _for_p18c[:] = [result]
    return result


def p18_schedule_pass() -> Figure:
    fig = Figure("P18", f"one scheduling pass over {JOBS:,} waiting jobs", "ms", f"<= {TARGET_MS:g} ms")
    passes, pure, cold, setup = _measured()
    fig.value, fig.baseline = median(passes) * 1000, median(pure) * 1000
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= TARGET_MS)
    fig.note = (
        f"median of {PASSES} passes of Cluster.schedule, 1 CPU free, none fits (max {max(passes) * 1000:.1f} ms); "
        f"the first pass after a restart, reading each job's view from the store: {cold * 1000:.0f} ms; "
        f"baseline: backfill.plan alone on the same queue; setup ({JOBS:,} submits) {setup:.1f} s"
    )
    return fig


def p18c_first_pass() -> Figure:
    """The first pass after a restart: no job's view is in memory, so each is read from the store (in bulk, with
    SQLite's JSON functions: store/waiting.py). Baseline: a warm pass (P18)."""
    fig = Figure(
        "P18C", f"first scheduling pass after a restart, {JOBS:,} waiting jobs", "ms", f"<= {COLD_TARGET_MS:g} ms"
    )
    passes, _, cold, _ = _measured(shared=True)
    fig.value, fig.baseline = cold * 1000, median(passes) * 1000
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= COLD_TARGET_MS)
    fig.note = "Cluster.schedule with the queue's views and the model cache emptied; baseline: a warm pass (P18)"
    return fig


def p18f_fair_share_pass() -> Figure:
    fig = Figure("P18F", f"scheduling pass, {JOBS:,} waiting jobs of 100 users", "ms", f"<= {TARGET_MS:g} ms")
    with tempfile.TemporaryDirectory(prefix="pai-bench-p18f-") as tmp:
        passes, pure, _, _ = asyncio.run(_measure(Path(tmp) / "local", users=100))
    fig.value, fig.baseline = median(passes) * 1000, median(pure) * 1000
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= TARGET_MS)
    fig.note = (
        f"median of {PASSES} passes with fair share reordering the line of 100 users and a per-user quota checked "
        f"for each job (max {max(passes) * 1000:.1f} ms); baseline: backfill.plan alone on the same queue"
    )
    return fig
