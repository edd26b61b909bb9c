"""P20: one poll of the Lab sidebar's job list (``server/jobs.py``: the list with each live job's tasks, states and
services, shaped as the Lab reads it) with 20 running jobs, in-process against a real daemon (process runtime).
On the embedded cluster a poll is one request (``GET /api/v2/local/jobs``). Baseline: the per-job path a remote
OpenPAI server gets (the list, then each live job's detail and services: 1 + 2 x 20 requests), timed on the same
daemon, polls of the two interleaved."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from pai_jupyter.client import AsyncClient
from pai_jupyter.server.jobs import job_row, listed_jobs, listed_per_job

from .common import Daemon, Figure, median, ratio, v1

JOBS = 20
POLLS = 30
LOG = logging.getLogger("bench")


async def _poll_times(home: Path) -> tuple[list[float], list[float]]:
    one, per_job = [], []
    async with AsyncClient("local", home=home) as pai:
        for i in range(POLLS + 2):  # the first two of each: warm-up (connections, the locality)
            for path, times in ((listed_jobs, one), (listed_per_job, per_job)):
                t0 = time.perf_counter()
                rows = [job_row("/", *r) for r in await path(pai, 200, None, LOG)]
                if i >= 2:
                    times.append(time.perf_counter() - t0)
                assert sum(len(r["tasks"]) for r in rows) == JOBS
    return one, per_job


def p20_sidebar_poll() -> Figure:
    fig = Figure("P20", f"sidebar poll: job list with tasks, {JOBS} running jobs", "ms", "<= 0.5x the per-job path")
    with Daemon("p20", cpus=JOBS) as d:
        jobs = [d.submit(v1(f"run-{i}", "sleep 600")) for i in range(JOBS)]
        for job in jobs:
            d.wait(job, {"RUNNING"}, timeout=60)
        one, per_job = asyncio.run(_poll_times(d.home))
    fig.value, fig.baseline = median(one) * 1000, median(per_job) * 1000
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.ratio is not None and f.ratio <= 0.5)
    fig.note = (
        f"median of {POLLS} polls (listed_jobs + job_row, in-process AsyncClient): 1 daemon request; "
        f"baseline: the per-job path (1 + {2 * JOBS} requests, concurrent), polls interleaved"
    )
    return fig
