"""P1 submit -> task started, P3 task line -> following client, P6 idle daemon RSS (process runtime)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from .common import Daemon, Figure, median, ratio, v1, wait_file

P1_JOBS = 30
P3_LINES = 30


def _stamp(path: Path) -> str:
    """The task command: the moment it runs, as seconds since the epoch with nanoseconds."""
    return f"date +%s.%N > {path}"


def p1_submit_to_start() -> Figure:
    """REST submit -> the task's command runs, vs subprocess.Popen of the same command (medians)."""
    fig = Figure("P1", "REST submit -> task process started", "ms", "<= 1.5x baseline + 10 ms")
    values: list[float] = []
    answers: list[float] = []
    bases: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pai-bench-p1-") as tmp, Daemon("p1") as d:
        out = Path(tmp)
        for i in range(P1_JOBS + 1):  # the first of each is a warm-up, not counted
            # value: one job at a time; the previous one is final, so the queue is empty
            path = out / f"job-{i}.ts"
            text = v1(f"p1-{i}", _stamp(path))
            t0 = time.time()
            job = d.submit(text)
            t_answer = time.time()
            started = float(wait_file(path))
            d.wait(job)
            # baseline: the same command from a bare Popen, interleaved so drift hits both alike
            bpath = out / f"bare-{i}.ts"
            b0 = time.time()
            subprocess.Popen(["/bin/sh", "-c", _stamp(bpath)]).wait()
            bare = float(wait_file(bpath))
            if i:
                values.append((started - t0) * 1000)
                answers.append((t_answer - t0) * 1000)
                bases.append((bare - b0) * 1000)
    fig.value, fig.baseline = median(values), median(bases)
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= 1.5 * f.baseline + 10)
    fig.note = (
        f"median of {len(values)} one-task jobs (min {min(values):.1f}, max {max(values):.1f} ms); "
        f"the 202 answer came {median(answers):.1f} ms after the POST (median), i.e. the task is spawned "
        f"inside the submit request; baseline: Popen('sh -c \"date +%s.%N > FILE\"'), same command"
    )
    return fig


def p3_log_latency() -> Figure:
    """A line printed by a task -> seen by a client following the live log stream (chunked HTTP)."""
    fig = Figure("P3", "task line -> following client", "ms", "median <= 50 ms")
    lat: list[float] = []
    got = 0
    with Daemon("p3") as d:
        cmd = f"for i in $(seq {P3_LINES}); do date +%s.%N; sleep 0.1; done"
        job = d.submit(v1("p3-stream", cmd))
        follower = d.client()
        buf = b""
        with follower.stream(
            "GET", f"/api/v2/local/jobs/{job}/logs/stream", params={"stream": "stdout"}, timeout=60
        ) as r:
            r.raise_for_status()
            for chunk in r.iter_raw():
                arrived = time.time()
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        stamp = float(line.strip())
                    except ValueError:  # the runtime's notice line
                        continue
                    got += 1
                    lat.append((arrived - stamp) * 1000)
        state = d.wait(job)
    if not lat:
        fig.note = f"no timestamped line reached the client (job {state})"
        fig.judge(lambda f: False)
        return fig
    lat_sorted = sorted(lat)
    p90 = lat_sorted[min(len(lat) - 1, int(0.9 * len(lat)))]
    fig.value = median(lat)
    fig.judge(lambda f: f.value <= 50)
    fig.note = (
        f"{got}/{P3_LINES} lines, ~100 ms apart, followed over GET .../logs/stream?stream=stdout; "
        f"min {lat_sorted[0]:.1f}, p90 {p90:.1f}, max {lat_sorted[-1]:.1f} ms; no baseline (absolute target)"
    )
    return fig


def _rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / (1 << 20)


def p6_idle_rss() -> Figure:
    """RSS of an idle daemon that has started and served a request, beside a bare sleeping interpreter."""
    fig = Figure("P6", "idle daemon RSS", "MB", "<= 80 MB")
    with Daemon("p6") as d:
        d.http.get("/api/v2/jobs").raise_for_status()
        time.sleep(0.5)
        fig.value = _rss_mb(d.pid)
        uss = psutil.Process(d.pid).memory_full_info().uss / (1 << 20)
    bare = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        time.sleep(0.5)
        fig.baseline = _rss_mb(bare.pid)
    finally:
        bare.kill()
        bare.wait()
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= 80)
    fig.note = (
        f"psutil RSS of the daemon pid from runtime.json after one GET /api/v2/jobs (USS {uss:.1f} MB); "
        f'baseline: `{Path(sys.executable).name} -c "import time; time.sleep(5)"`, for scale'
    )
    return fig
