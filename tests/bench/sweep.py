"""P19: a sweep's overhead per trial. The same N trivial jobs (each appends one report line with the shell, as
``pai_jupyter.report`` would) run twice on one daemon with 2 CPUs, 2 at a time: by ``Sweep`` (a grid over N
values, its state written to the cluster after each change, each trial tagged and its reports read) and by a
bare loop that submits the next job as soon as one ends. Both poll every 50 ms through the same client. The
figure is the wall time per trial of the sweep; the baseline the bare loop's; target ratio <= 1.3."""

from __future__ import annotations

import time

from pai_jupyter.client import Client
from pai_jupyter.client.profiles import Profile
from pai_jupyter.common.states import FINAL
from pai_jupyter.sweep import Sweep
from pai_jupyter.sweep.driver import trial_job

from .common import Daemon, Figure, ratio

TRIALS = 40
POLL = 0.05
ROUNDS = 5
TEMPLATE = """\
protocolVersion: 2
name: p19
type: job
prerequisites:
  - {name: img, type: dockerimage, uri: busybox}
taskRoles:
  main:
    instances: 1
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}
    commands:
      - echo '{"time":1,"step":0,"metrics":{"loss":<% $parameters.x %>}}' >> "$PAI_TASK_DIR/run/reports.jsonl"
"""


def _bare(client: Client, prefix: str) -> float:
    """Submit, keep 2 in flight, submit the next as soon as one ends."""
    t0, pending, live = time.perf_counter(), list(range(TRIALS)), []
    while pending or live:
        while pending and len(live) < 2:
            n = pending.pop(0)
            live.append(client.submit(trial_job(TEMPLATE, f"{prefix}-{n:04d}", {"x": n})))
        live = [j for j in live if client.detail(j).state not in FINAL]
        if (live and len(live) == 2) or (live and not pending):
            time.sleep(POLL)
    return time.perf_counter() - t0


def p19_sweep_overhead() -> Figure:
    fig = Figure("P19", f"sweep: per trial, {TRIALS} trials 2 at a time", "ms", "<= 1.3x the bare loop")
    with Daemon("p19", cpus=2) as d:
        user = d.http.get("/api/v2/info").json()["user"]
        with Client(Profile(name="bench", url=d.url, username=user, token=d.token)) as client:
            _bare(client, "warm")  # the runtime's first tasks (a warm pool) before either is timed
            bares, sweeps = [], []
            for rnd in range(ROUNDS):  # interleaved, so both see the same load of a shared machine
                bares.append(_bare(client, f"bare{rnd}"))
                sweep = Sweep(f"p19-{rnd}", TEMPLATE, {"x": list(range(TRIALS))}, client=client, poll=POLL)
                t0 = time.perf_counter()
                sweep.run(timeout=300)
                sweeps.append(time.perf_counter() - t0)
    bare, swept = min(bares), min(sweeps)
    done = sum(t["state"] == "SUCCEEDED" for t in sweep.trials)
    fig.value, fig.baseline = swept / TRIALS * 1000, bare / TRIALS * 1000
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.ratio is not None and f.ratio <= 1.3 and done == TRIALS)
    fig.note = (
        f"{done}/{TRIALS} trials succeeded with their objective read back; best of {ROUNDS} interleaved rounds: "
        f"sweep {swept:.2f} s, bare submit loop {bare:.2f} s (same jobs, same client, both poll every "
        f"{POLL * 1000:g} ms; all rounds: sweep {', '.join(f'{x:.2f}' for x in sweeps)}, bare "
        f"{', '.join(f'{x:.2f}' for x in bares)})"
    )
    return fig
