"""The scheduling plan (cluster/core/backfill.py) in-process, over thousands of random queues run to the end in a
small event simulation: no over-commit, gang all-or-nothing, the heads in queue (priority) order, nobody starves,
and the job at the head starts no later than under strict FIFO (a worked example among them)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from pai_jupyter.cluster.core.backfill import Busy, Res, Waiting, add, fits, plan
from tests.properties import examples

TOTAL: Res = (4, 4096, 2)


@dataclass
class SimJob:
    waiting: Waiting
    vc: str
    duration: float  # what it really runs (its estimate when it has one: the daemon stops it then)


def fifo_plan(now: float, total: Res, quotas: dict[str, Res], busy: list[Busy], queues: dict[str, list[Waiting]]):
    """Strict FIFO, the reference: each virtual cluster's heads while they fit, nothing behind them."""
    used: dict[str, Res] = {}
    machine: Res = (0, 0, 0)
    for b in busy:
        used[b.vc] = add(used.get(b.vc, (0, 0, 0)), b.demand)
        machine = add(machine, b.demand)
    starts = []
    for vc, queue in queues.items():
        for job in queue:
            quota_left = tuple(q - u for q, u in zip(quotas[vc], used.get(vc, (0, 0, 0)), strict=True))
            room = tuple(min(a, t - m) for a, t, m in zip(quota_left, total, machine, strict=True))
            n, took = 0, (0, 0, 0)
            for t in job.tasks:
                if not fits(add(took, t), room) or (job.gang and not fits(job.total, room)):
                    break
                took, n = add(took, t), n + 1
            if n:
                starts.append((job.id, n))
                used[vc] = add(used.get(vc, (0, 0, 0)), took)
                machine = add(machine, took)
            if n < len(job.tasks):
                break
    return starts


def simulate(jobs: list[SimJob], quotas: dict[str, Res], planner) -> tuple[dict[int, float], list[tuple]]:
    """Run the jobs to the end; returns each job's first start time and every plan (for the checks)."""
    now = 0.0
    waiting = {j.waiting.id: j for j in jobs}
    left = {j.waiting.id: list(j.waiting.tasks) for j in jobs}
    running: list[tuple[float, Busy]] = []  # (real end, busy)
    started: dict[int, float] = {}
    plans = []
    for _ in range(10 * len(jobs) + 10):
        queues: dict[str, list[Waiting]] = {}
        for j in jobs:  # queue order: the list's order (priority already applied by the caller)
            if left[j.waiting.id]:
                w = j.waiting
                queues.setdefault(j.vc, []).append(Waiting(w.id, tuple(left[w.id]), w.gang, w.estimate_s))
        if not queues and not running:
            break
        busy = [b for _, b in running]
        result = planner(now, TOTAL, quotas, busy, queues)
        starts = result if isinstance(result, list) else result.starts
        plans.append((now, queues, busy, result))
        for job_id, n in starts:
            j = waiting[job_id]
            took = (0, 0, 0)
            for t in left[job_id][:n]:
                took = add(took, t)
            left[job_id] = left[job_id][n:]
            started.setdefault(job_id, now)
            ends_by = now + j.waiting.estimate_s if j.waiting.estimate_s is not None else None
            running.append((now + j.duration, Busy(j.vc, took, ends_by)))
        # no over-commit, per virtual cluster and for the machine
        machine, per_vc = (0, 0, 0), {}
        for _, b in running:
            machine = add(machine, b.demand)
            per_vc[b.vc] = add(per_vc.get(b.vc, (0, 0, 0)), b.demand)
        assert fits(machine, TOTAL) and all(fits(u, quotas[vc]) for vc, u in per_vc.items())
        if not running:
            assert not starts, "nothing runs and nothing could start: stuck"
            break
        now = min(end for end, _ in running)
        running = [(end, b) for end, b in running if end > now]
    assert all(not t for t in left.values()), "a job never ran (starved)"
    return started, plans


task_st = st.tuples(st.integers(1, 4), st.sampled_from([256, 1024, 2048]), st.integers(0, 2))


SPLITS = {  # virtual clusters' quotas: one, two that share the machine, two that divide it
    "one": {"default": TOTAL},
    "shared": {"default": (3, 4096, 1), "b": (2, 2048, 2)},
    "divided": {"default": (2, 2048, 1), "b": (2, 2048, 1)},
}


@st.composite
def job_lists(draw: st.DrawFn, splits: tuple[str, ...] = tuple(SPLITS)) -> tuple[list[SimJob], dict[str, Res]]:
    quotas = SPLITS[draw(st.sampled_from(splits))]
    vcs = list(quotas)
    jobs = []
    for i in range(draw(st.integers(1, 12))):
        vc = draw(st.sampled_from(vcs))
        q = quotas[vc]
        gang = draw(st.booleans())
        tasks = draw(st.lists(task_st.filter(lambda t, q=q: fits(t, q)), min_size=1, max_size=3))
        total = (0, 0, 0)
        for t in tasks:
            total = add(total, t)
        if gang and not fits(total, q):
            tasks = tasks[:1]  # (the daemon refuses a gang that can never fit)
        duration = float(draw(st.integers(1, 20)))
        estimate = duration if draw(st.booleans()) else None
        jobs.append(SimJob(Waiting(i, tuple(tasks), gang, estimate), vc, duration))
    return jobs, quotas


@settings(max_examples=examples(1000), deadline=None)
@given(case=job_lists())
def test_random_queues_run_to_the_end_safely_and_the_head_is_never_delayed(
    case: tuple[list[SimJob], dict[str, Res]],
) -> None:
    jobs, quotas = case
    started, plans = simulate(jobs, quotas, plan)
    fifo_started, _ = simulate(jobs, quotas, fifo_plan)
    # each virtual cluster's first job starts no later than under FIFO, when every run time is known: a job without
    # one that ends early can free what FIFO's head takes at once, while backfill reserved by the known ends
    # (docs/queue.md: never later than the reservation, which the test below checks)
    if all(j.waiting.estimate_s is not None for j in jobs):
        for vc in quotas:
            first = next((j for j in jobs if j.vc == vc), None)
            if first is not None:
                assert started[first.waiting.id] <= fifo_started[first.waiting.id]
    for _, queues, _, result in plans:
        by_id = {w.id: w for q in queues.values() for w in q}
        for job_id, n in result.starts:  # gang: all or nothing
            assert n >= 1 and (n == len(by_id[job_id].tasks) or not by_id[job_id].gang)
        for queue in queues.values():  # what is not backfilled is the line's start, in order
            heads = [j for j, _ in result.starts if j not in result.backfilled and by_id[j] in queue]
            assert heads == [w.id for w in queue[: len(heads)]]
        for vc, reservation in result.heads.items():  # a reserved head is the first job left in its line
            assert reservation.job_id in [w.id for w in queues[vc]]


@settings(max_examples=examples(500), deadline=None)
@given(case=job_lists(("one", "divided")))
def test_a_head_starts_by_the_time_reserved_for_it_when_every_run_time_is_known(
    case: tuple[list[SimJob], dict[str, Res]],
) -> None:
    """EASY's promise: with every job's run time known, a head starts no later than its shadow time (where
    virtual clusters share the machine, another one's jobs may take what a head waits for, as under FIFO)."""
    jobs, quotas = case
    for j in jobs:
        object.__setattr__(j.waiting, "estimate_s", j.duration)
    started, plans = simulate(jobs, quotas, plan)
    promised: dict[int, float] = {}
    for _, _, _, result in plans:
        for reservation in result.heads.values():
            if reservation.shadow is not None:
                promised.setdefault(reservation.job_id, reservation.shadow)
    for job_id, shadow in promised.items():
        assert started[job_id] <= shadow


def test_the_issues_example_small_jobs_run_in_the_gaps_and_the_gang_job_is_not_delayed() -> None:
    """2 CPUs; one runs a job for 10 more minutes; a 2-task gang job is at the head and ten 1-task jobs of 5
    minutes wait behind it: five pairs run in the gap... as many as end before the gang job can start."""
    quotas = {"default": (2, 4096, 0)}
    total = (2, 4096, 0)
    gang = Waiting(1, ((1, 256, 0), (1, 256, 0)), True, 3600.0)
    small = [Waiting(10 + i, ((1, 256, 0),), True, 300.0) for i in range(10)]
    busy = [Busy("default", (1, 256, 0), 600.0)]
    result = plan(0.0, total, quotas, busy, {"default": [gang, *small]})
    assert result.starts == [(10, 1)] and result.backfilled == {10}  # the free CPU, for a job that ends in time
    assert result.heads["default"].shadow == 600.0
    # at 300 s the first small job ends: another fits in the gap (ends at 600)
    result = plan(300.0, total, quotas, busy, {"default": [gang, *small[1:]]})
    assert result.starts == [(11, 1)]
    # at 600 s everything ended: the gang job starts, nothing overtakes it
    result = plan(600.0, total, quotas, [], {"default": [gang, *small[2:]]})
    assert result.starts == [(1, 2)] and not result.backfilled
    # without run times, a small job may not take the CPU the gang job needs
    unknown = [Waiting(10 + i, ((1, 256, 0),), True, None) for i in range(10)]
    result = plan(0.0, total, quotas, busy, {"default": [gang, *unknown]})
    assert result.starts == [] and result.heads["default"].shadow == 600.0
    # ... but memory or GPUs it cannot use are fair game (here: a CPU job while the head waits for a GPU)
    gpu_head = Waiting(2, ((1, 256, 1),), True, None)
    result = plan(
        0.0,
        (2, 4096, 1),
        {"default": (2, 4096, 1)},
        [Busy("default", (0, 0, 1), None)],
        {"default": [gpu_head, unknown[0], unknown[1]]},
    )
    assert result.starts == [(10, 1)] and result.heads["default"].shadow is None


@st.composite
def early_enders(draw: st.DrawFn, splits: tuple[str, ...] = tuple(SPLITS)) -> tuple[list[SimJob], dict[str, Res]]:
    """Random queues where a job with an estimate (its max run time) may end well before it; some have none."""
    jobs, quotas = draw(job_lists(splits))
    for j in jobs:
        if j.waiting.estimate_s is not None:
            j.duration = float(draw(st.integers(1, int(j.waiting.estimate_s))))  # ends early, or just in time
        elif draw(st.booleans()):
            object.__setattr__(j.waiting, "estimate_s", j.duration + draw(st.integers(0, 20)))
            j.duration = float(draw(st.integers(1, int(j.waiting.estimate_s))))
    return jobs, quotas


@settings(max_examples=1000, deadline=None)
@given(case=early_enders())
def test_jobs_that_end_before_their_estimate_starve_nobody_and_keep_gangs_whole(
    case: tuple[list[SimJob], dict[str, Res]],
) -> None:
    """Estimates are upper bounds: jobs end early, or give none. Every job still runs (``simulate`` asserts it),
    nothing is over-committed, a gang starts whole, and a head reserved a time starts by it: an early end only
    brings a reservation forward, and what was backfilled ends by the reservation it was weighed against."""
    jobs, quotas = case
    started, plans = simulate(jobs, quotas, plan)
    promised: dict[int, float] = {}
    for _, queues, _, result in plans:
        by_id = {w.id: w for q in queues.values() for w in q}
        for job_id, n in result.starts:
            assert n == len(by_id[job_id].tasks) or not by_id[job_id].gang
        for reservation in result.heads.values():
            if reservation.shadow is not None:
                promised.setdefault(reservation.job_id, reservation.shadow)
    if len(quotas) == 1 or quotas == SPLITS["divided"]:  # (shared machine: another vc's jobs may take it, as FIFO)
        for job_id, shadow in promised.items():
            assert started[job_id] <= shadow, f"job {job_id} reserved {shadow}, started {started[job_id]}"


def test_an_early_end_brings_the_reservation_forward_and_a_backfilled_job_keeps_its_gap() -> None:
    """2 CPUs: A (1 CPU, deadline 600 s) runs, a 2-task gang head waits, B (est. 600 s) is backfilled into the
    gap. A ends at 100 s: the head's reservation moves to B's deadline (600 s, no later than first reserved),
    and a job of 500 s now also fits the new gap; one without an estimate still may not take the head's CPU."""
    quotas = {"default": (2, 4096, 0)}
    total = (2, 4096, 0)
    head = Waiting(1, ((1, 256, 0), (1, 256, 0)), True, 60.0)
    b = Waiting(2, ((1, 256, 0),), True, 600.0)
    first = plan(0.0, total, quotas, [Busy("default", (1, 256, 0), 600.0)], {"default": [head, b]})
    assert first.starts == [(2, 1)] and first.heads["default"].shadow == 600.0
    c = Waiting(3, ((1, 256, 0),), True, 500.0)
    unknown = Waiting(4, ((1, 256, 0),), True, None)
    later = plan(100.0, total, quotas, [Busy("default", (1, 256, 0), 600.0)], {"default": [head, unknown, c]})
    assert later.starts == [(3, 1)] and later.heads["default"].shadow == 600.0
    # B ends early too (at 200 s): nothing holds the head back any more, and it starts before anyone behind it
    now = plan(200.0, total, quotas, [], {"default": [head, unknown]})
    assert now.starts == [(1, 2)] and not now.backfilled
