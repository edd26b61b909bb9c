"""P21: one refresh of the Lab's Sweeps page (``server/lab_sweeps.py``'s ``sweeps_page``: the sweeps list and the
picked sweep with its trials) with 20 running trials, in-process against a real daemon (process runtime). A
refresh is three daemon requests: the sweeps with their states, the live jobs, the live trials' reports. Baseline:
the reads it replaced, a state per sweep and a detail and the reports per live trial (1 + 1 + 2 x 20 requests,
concurrent), timed on the same daemon, refreshes of the two interleaved."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from pai_jupyter.client import AsyncClient
from pai_jupyter.server.lab_sweeps import sweeps_page

from .common import Daemon, Figure, median, ratio, v1

TRIALS = 20
REFRESHES = 30
LOG = logging.getLogger("bench")


async def per_trial(pai: AsyncClient, name: str) -> int:
    """The baseline: the list, each sweep's state, then each live trial's detail and reports."""
    listed = await pai.list_sweeps()
    records = await asyncio.gather(*(pai.sweep_state(s.name) for s in listed))
    trials = (next(r for r in records if r.name == name).state or {})["trials"]
    found = await asyncio.gather(*(asyncio.gather(pai.detail(t["job"]), pai.reports(t["job"])) for t in trials))
    return sum(1 for detail, _ in found if detail.state == "RUNNING")


async def _refresh_times(home: Path, jobs: list[str]) -> tuple[list[float], list[float]]:
    one, old = [], []
    async with AsyncClient("local", home=home) as pai:
        trials = [
            {"number": n, "job": j, "params": {}, "state": "SUBMITTED", "metrics": {}} for n, j in enumerate(jobs)
        ]
        await pai.put_sweep_state("p21", {"status": "running", "objective": "loss", "trials": trials}, 0)
        for i in range(REFRESHES + 2):  # the first two of each: warm-up (connections, the locality)
            t0 = time.perf_counter()
            page = await sweeps_page(pai, "p21", LOG)
            t1 = time.perf_counter()
            running = await per_trial(pai, "p21")
            t2 = time.perf_counter()
            assert page["sweep"] is not None and [t["state"] for t in page["sweep"]["trials"]] == ["RUNNING"] * TRIALS
            assert running == TRIALS
            if i >= 2:
                one.append(t1 - t0)
                old.append(t2 - t1)
    return one, old


def p21_sweeps_refresh() -> Figure:
    fig = Figure("P21", f"Sweeps page refresh, {TRIALS} running trials", "ms", "<= 0.5x the per-trial reads")
    with Daemon("p21", cpus=TRIALS) as d:
        jobs = [d.submit(v1(f"p21-{i}", "sleep 600")) for i in range(TRIALS)]
        for job in jobs:
            d.wait(job, {"RUNNING"}, timeout=60)
        one, old = asyncio.run(_refresh_times(d.home, jobs))
    fig.value, fig.baseline = median(one) * 1000, median(old) * 1000
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.ratio is not None and f.ratio <= 0.5)
    fig.note = (
        f"median of {REFRESHES} refreshes (sweeps_page, in-process AsyncClient): 3 daemon requests; "
        f"baseline: a state per sweep, a detail and the reports per live trial (2 + {2 * TRIALS} requests, "
        "concurrent), refreshes interleaved"
    )
    return fig
