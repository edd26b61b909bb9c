"""`make bench`: the performance figures of the embedded cluster, each beside a baseline from the same run.

    .venv/bin/python -m tests.bench.run [--only P1,P3,...] [--runs 3]

Every benchmark starts its own daemon in a fresh temp PAI_JUPYTER_HOME and prints its row as it finishes. The
benchmarks run ``--runs`` times, interleaved (all of them once, then all again, ...: a burst of load on the
machine hits every figure a little rather than one figure's every run); each figure in the final table is the
median of its runs with their spread (lowest-highest), also in .bench/results.json. Timings are reported, never
asserted: a missed target says so in the table and the exit status stays 0. The status is 1 only when a
benchmark could not run at all (its row says why).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from .common import Daemon, Figure, Table, combined, median, ratio
from .containers import p8_docker_submit_to_running
from .hub import p22_hub_spawn
from .hubslurm import p22s_hub_spawn_on_slurm
from .kernel import p14_kernel_start, p14_round_trip, p14_tunnel_round_trip, p14_tunnel_start
from .lab import p11_sidebar_refresh, p11_sidebar_render, p12_log_heap, p12_log_tail, p13_terminal_echo
from .latency import p1_submit_to_start, p3_log_latency, p6_idle_rss
from .load import p2_throughput, p4_list
from .notebook import p7_load_ext
from .preempt import p24_preempt_to_requeued
from .proxy import p5_proxy_latency, p5_proxy_throughput
from .queue import p18_schedule_pass, p18c_first_pass, p18f_fair_share_pass
from .sidebar import p20_sidebar_poll
from .slurm import p15_submit_to_running, p16_gang_job, p17_drain, stop_cluster
from .sweep import p19_sweep_overhead
from .sweeps_page import p21_sweeps_refresh
from .tracking import p23_drain, p23m_metrics

ROOT = Path(__file__).resolve().parents[2]
# measured once a run whatever --runs says: their figure is already a median or best of several inside one run, and a
# run of theirs takes a minute or more (P4 fills 10,000 jobs; P17 drains 100 jobs twice each way on Slurm; P22 and
# P22S spawn JupyterLab through two Hubs three times each; P23 drains 200 jobs three times and waits for their runs)
ONCE = {"P4", "P17", "P22", "P22S", "P23"}
BENCHES: list[tuple[str, str, Callable[[], Figure]]] = [
    ("P1", "REST submit -> task process started", p1_submit_to_start),
    ("P2", "200 queued jobs `true` on 2 slots", p2_throughput),
    ("P3", "task line -> following client", p3_log_latency),
    ("P4", "list 10,000 jobs over REST", p4_list),
    ("P5", "TensorBoard data request via the extension", p5_proxy_latency),
    ("P5T", "100 MB body via the extension", p5_proxy_throughput),
    ("P6", "idle daemon RSS", p6_idle_rss),
    ("P7", "%load_ext pai_jupyter in a fresh interpreter", p7_load_ext),
    ("P8", "Docker submit -> command in container ran", p8_docker_submit_to_running),
    ("P11", "sidebar: first render of 10,000 jobs", p11_sidebar_render),
    ("P11R", "sidebar: an unchanged auto-refresh", p11_sidebar_refresh),
    ("P12", "job page: tail of a 100 MB log shown", p12_log_tail),
    ("P12H", "job page: JS heap growth opening a 100 MB log", p12_log_heap),
    ("P13", "terminal keystroke echo via the extension", p13_terminal_echo),
    ("P14", "PAI kernel start: submit -> first execute_reply", p14_kernel_start),
    ("P14R", "PAI kernel trivial cell round trip", p14_round_trip),
    ("P14T", "PAI kernel start through its SSH tunnel", p14_tunnel_start),
    ("P14TR", "PAI kernel trivial cell round trip through its SSH tunnel", p14_tunnel_round_trip),
    ("P15", "Slurm: submit -> command running", p15_submit_to_running),
    ("P16", "Slurm: 3-task 2-node gang job, submit -> done", p16_gang_job),
    ("P17", "Slurm: 100 queued one-task jobs drained", p17_drain),
    ("P18", "one scheduling pass over 10,000 waiting jobs", p18_schedule_pass),
    ("P18C", "first scheduling pass after a restart", p18c_first_pass),
    ("P18F", "scheduling pass, 10,000 waiting jobs of 100 users", p18f_fair_share_pass),
    ("P19", "sweep: per trial beside a bare submit loop", p19_sweep_overhead),
    ("P20", "sidebar poll: job list with tasks, 20 running jobs", p20_sidebar_poll),
    ("P21", "Sweeps page refresh, 20 running trials", p21_sweeps_refresh),
    ("P22", "JupyterHub: spawn click -> JupyterLab ready", p22_hub_spawn),
    ("P22S", "Hub spawn on Slurm: click -> Lab ready, beside batchspawner", p22s_hub_spawn_on_slurm),
    ("P23", "200-job drain, every job an MLflow run", p23_drain),
    ("P23M", "job logging 10,000 metric points to MLflow", p23m_metrics),
    ("P24", "preemption signal -> job queued again", p24_preempt_to_requeued),
]


def d1_daemon_ready() -> Figure:
    """The wall time of control.start for every daemon this run started, beside a bare interpreter start."""
    fig = Figure("D1", "daemon ready (control.start)", "s", "<= 1 s")
    starts = Daemon.starts
    if not starts:
        fig.note = "no daemon was started"
        return fig
    bare = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t0)
    fig.value, fig.baseline = median([s for _, s in starts]), median(bare)
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= 1.0)
    each = ", ".join(f"{k} {s:.2f}" for k, s in starts)
    fig.note = (
        f"median of the {len(starts)} daemon starts in this run ({each}"
        f" s; slowest {max(s for _, s in starts):.2f} s; start polls every 50 ms); "
        f"baseline: `python -c pass`, for scale"
    )
    return fig


def _header() -> str:
    """What the figures were measured on; a busy machine (other test runs) skews every timing."""
    try:
        rev = (
            subprocess.run(
                ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=5
            ).stdout.strip()
            or "?"
        )
    except (OSError, subprocess.TimeoutExpired):
        rev = "?"
    cpus = os.cpu_count() or 1
    load = os.getloadavg()[0]
    text = (
        f"pai_jupyter benchmarks at {rev}: {cpus} CPUs, load average {load:.2f}, Python "
        f"{sys.version.split()[0]} (figures are medians unless said otherwise)\n"
    )
    if load > 0.5 * cpus:
        text += f"WARNING: the machine is busy (load {load:.1f} on {cpus} CPUs): timings will be slower than usual\n"
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.bench.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", help="comma-separated ids to run (default: all)")
    p.add_argument("--runs", type=int, default=3, help="runs of each benchmark, interleaved (default 3)")
    p.add_argument("--out", default=str(ROOT / ".bench" / "results.json"))
    args = p.parse_args(argv)
    only = {x.strip().upper() for x in args.only.split(",")} if args.only else None
    os.environ.pop("PAI_JUPYTER_HOME", None)  # every daemon gets its own temp home, passed explicitly

    table = Table()
    crashed = False
    t_run = time.perf_counter()
    print(_header(), flush=True)
    chosen = [b for b in BENCHES if not only or b[0] in only]
    runs: dict[str, list[Figure]] = {key: [] for key, _, _ in chosen}
    took: dict[str, float] = {key: 0.0 for key, _, _ in chosen}
    for n in range(1, max(1, args.runs) + 1):
        for key, title, bench in chosen:
            if key in ONCE and n > 1:
                continue
            rounds = 1 if key in ONCE else args.runs
            print(f"[{key}] {title} (run {n} of {rounds}) ...", flush=True)
            t0 = time.perf_counter()
            try:
                fig = bench()
            except Exception as exc:
                crashed = True
                traceback.print_exc()
                fig = Figure(key, title, "", "", note=f"could not run: {type(exc).__name__}: {exc}"[:400])
            runs[key].append(fig)
            took[key] += time.perf_counter() - t0
            print(table.render([fig], notes=True))
            print(f"  ({time.perf_counter() - t0:.1f} s)\n", flush=True)
    stop_cluster()
    table.figures = [combined(runs[key]) for key, _, _ in chosen]
    if not only or "D1" in only:
        table.figures.append(d1_daemon_ready())
    wall = time.perf_counter() - t_run

    print("=" * 100)
    print(table.render())
    missed = [f.key for f in table.figures if f.met is False]
    which = f": {', '.join(missed)}" if missed else ""
    print(
        f"\n{len(table.figures)} figures, {len(missed)} target(s) missed{which}; run took {wall:.0f} s, "
        f"load average now {os.getloadavg()[0]:.2f}"
    )
    slowest = sorted(took.items(), key=lambda kv: -kv[1])[:6]
    print("where the time went: " + ", ".join(f"{k} {s:.0f} s" for k, s in slowest))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({f.key: f.as_json() for f in table.figures}, indent=2) + "\n")
    print(f"results: {out}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
