"""P15-P17 the Slurm backend on the local two-node test cluster (tests/slurm/cluster.sh), each beside the same work
done with Slurm's own commands in the same run: what the daemon adds on top of Slurm.

P15 submit -> command running vs a bare ``sbatch --wrap``; P16 the 3-task 2-node gang job (ps x1 + worker x2) to
its end vs a hand-written sbatch script of it (one allocation, a step per role); P17 100 queued one-task jobs
drained vs an ``sbatch`` loop. Needs root and Slurm's daemons (``apt-get install slurmctld slurmd slurm-client
munge``); the row says why where they are missing."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .common import Daemon, Figure, median, ratio, wait_file

CLUSTER = Path(__file__).resolve().parents[1] / "slurm" / "cluster.sh"
P15_RUNS = 5
P16_RUNS = 3
P17_JOBS = 100
P17_ROUNDS = 2


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "the test Slurm cluster's slurmd runs as root"
    gone = [c for c in ("sbatch", "squeue", "srun") if not shutil.which(c)]
    gone += [d for d in ("munged", "slurmctld", "slurmd") if not Path("/usr/sbin", d).exists()]
    return f"Slurm is not installed ({', '.join(gone)} missing)" if gone else None


_shared: list[Path] = []  # the run's one test cluster, started by the first Slurm figure (a start costs seconds)


@contextlib.contextmanager
def _cluster() -> Iterator[Path]:
    """The run's two-node test cluster in a temp dir (SLURM_CONF set while a figure uses it; started once, stopped
    at the end of the run: ``stop_cluster``); yields a fresh dir of that one for the figure's stamps."""
    if not _shared:
        d = Path(tempfile.mkdtemp(prefix="pai-bench-slurm-"))
        d.chmod(0o755)
        _shared.append(d)
        atexit.register(stop_cluster)  # (also when the run is interrupted)
        subprocess.run(["bash", str(CLUSTER), "start", str(d)], check=True, capture_output=True, timeout=60)
    d = _shared[0]
    stamps = Path(tempfile.mkdtemp(prefix="stamps-", dir=d))  # each figure's own (a round's stamp is never read again)
    stamps.chmod(0o755)
    old = os.environ.get("SLURM_CONF")
    try:
        os.environ["SLURM_CONF"] = str(d / "etc" / "slurm.conf")
        yield stamps
    finally:
        os.environ.pop("SLURM_CONF", None) if old is None else os.environ.__setitem__("SLURM_CONF", old)


def stop_cluster() -> None:
    """Stop the run's test cluster, if a figure started one."""
    while _shared:
        d = _shared.pop()
        subprocess.run(["bash", str(CLUSTER), "stop", str(d)], capture_output=True, timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def _job(name: str, roles: dict[str, tuple[int, str]]) -> str:
    task_roles = {
        r: {
            "instances": n,
            "dockerImage": "img",
            "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
            "commands": [cmd],
        }
        for r, (n, cmd) in roles.items()
    }
    img = [{"name": "img", "type": "dockerimage", "uri": "ubuntu"}]
    doc = {"protocolVersion": 2, "name": name, "type": "job", "taskRoles": task_roles, "prerequisites": img}
    return json.dumps(doc)


def _sbatch(*args: str) -> str:
    done = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip().split(";")[0]


def _slurm_done(ids: set[str], timeout: float = 600) -> None:
    """Poll squeue (every 50 ms) until none of ``ids`` is pending or running."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["squeue", "-h", "-t", "PD,R,CG,CF", "-o", "%A"], capture_output=True, text=True).stdout
        if not ids & set(out.split()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError("Slurm jobs still running")
        time.sleep(0.05)


def _guard(fig: Figure, body: Callable[[Figure], None]) -> Figure:
    why = _missing()
    if why:
        fig.note = f"skipped: {why}"
        return fig
    body(fig)
    return fig


def p15_submit_to_running() -> Figure:
    fig = Figure("P15", "Slurm: submit -> command running", "s", "<= 1.2x baseline + 0.2 s")

    def body(fig: Figure) -> None:
        values, bases = [], []
        with _cluster() as d, Daemon("p15", runtime="slurm", cpus=4) as dm:
            for i in range(P15_RUNS + 1):  # the first of each is a warm-up
                mine, theirs = d / f"mine-{i}", d / f"theirs-{i}"
                t0 = time.time()
                job = dm.submit(_job(f"p15-{i}", {"main": (1, f"date +%s.%N > {mine}")}))
                value = float(wait_file(mine, timeout=60, poll=0.005)) - t0
                dm.wait(job, timeout=60, poll=0.05)
                b0 = time.time()
                _sbatch("-n1", "-c1", "--mem=256", "-o", "/dev/null", f"--wrap=date +%s.%N > {theirs}")
                base = float(wait_file(theirs, timeout=60, poll=0.005)) - b0
                if i:
                    values.append(value)
                    bases.append(base)
        fig.value, fig.baseline = median(values), median(bases)
        fig.ratio = ratio(fig.value, fig.baseline)
        fig.judge(lambda f: f.value <= 1.2 * f.baseline + 0.2)
        fig.note = (
            f"median of {P15_RUNS} (after a warm-up): REST submit -> the command's own `date` on its node; baseline "
            "`sbatch --wrap` of the same command (Slurm's 1 s scheduler tick dominates both)"
        )

    return _guard(fig, body)


def p16_gang_job() -> Figure:
    fig = Figure("P16", "Slurm: 3-task 2-node gang job, submit -> done", "s", "<= 1.2x baseline")

    def body(fig: Figure) -> None:
        values, bases = [], []
        with _cluster() as d, Daemon("p16", runtime="slurm", cpus=4) as dm:
            script = d / "gang.sh"
            script.write_text(
                "#!/bin/bash\n"
                "srun --exact -n1 --nodes=1-1 -c1 --mem-per-cpu=256 --gres=none true &\n"
                "srun --exact -n2 --nodes=1-2 -c1 --mem-per-cpu=256 --gres=none true &\n"
                "wait\n"
            )
            for i in range(P16_RUNS + 1):
                t0 = time.perf_counter()
                job = dm.submit(_job(f"p16-{i}", {"ps": (1, "true"), "worker": (2, "true")}))
                state = dm.wait(job, timeout=120, poll=0.05)
                value = time.perf_counter() - t0
                if state != "SUCCEEDED":
                    raise RuntimeError(f"{job} ended {state}")
                b0 = time.perf_counter()
                _slurm_done({_sbatch("-n3", "-c1", "--mem-per-cpu=256", "-o", "/dev/null", str(script))}, 120)
                base = time.perf_counter() - b0
                if i:
                    values.append(value)
                    bases.append(base)
        fig.value, fig.baseline = median(values), median(bases)
        fig.ratio = ratio(fig.value, fig.baseline)
        fig.judge(lambda f: f.ratio is not None and f.ratio <= 1.2)
        fig.note = (
            f"median of {P16_RUNS}: ps x1 + worker x2 (`true`) to SUCCEEDED over REST (rendezvous of all three "
            "included); baseline: the same allocation and steps as a hand-written sbatch script, until squeue "
            "no longer lists it"
        )

    return _guard(fig, body)


def p17_drain() -> Figure:
    fig = Figure("P17", f"Slurm: {P17_JOBS} queued one-task jobs drained", "s", "<= 1.2x baseline")

    def ours(dm: Daemon, round_: int) -> float:
        t0 = time.perf_counter()
        for i in range(P17_JOBS):
            dm.submit(_job(f"p17-{round_}-{i}", {"main": (1, "true")}))
        deadline, total = time.monotonic() + 900, P17_JOBS * (round_ + 1)
        while dm.count(("SUCCEEDED", "FAILED", "STOPPED")) < total and time.monotonic() < deadline:
            time.sleep(0.1)
        took = time.perf_counter() - t0
        if dm.count(("SUCCEEDED",)) != total:
            raise RuntimeError(f"only {dm.count(('SUCCEEDED',))} of {total} jobs succeeded")
        return took

    def theirs() -> float:
        b0 = time.perf_counter()
        ids = {_sbatch("-n1", "-c1", "--mem=256", "-o", "/dev/null", "--wrap=true") for _ in range(P17_JOBS)}
        _slurm_done(ids, 900)
        return time.perf_counter() - b0

    def body(fig: Figure) -> None:
        values, bases = [], []
        with _cluster(), Daemon("p17", runtime="slurm", cpus=4) as dm:
            for round_ in range(P17_ROUNDS):  # alternating, so a busy spell of the machine hits both
                if round_ % 2:
                    values.append(ours(dm, round_))
                    bases.append(theirs())
                else:
                    bases.append(theirs())
                    values.append(ours(dm, round_))
        fig.value, fig.baseline = min(values), min(bases)
        fig.ratio = ratio(fig.value, fig.baseline)
        fig.judge(lambda f: f.ratio is not None and f.ratio <= 1.2)
        each = ", ".join(f"{v:.1f}/{b:.1f}" for v, b in zip(values, bases, strict=True))
        fig.note = (
            f"best of {P17_ROUNDS} rounds (alternating; ours/baseline s: {each}): {P17_JOBS} REST submits of `true` "
            f"until all are SUCCEEDED; baseline: {P17_JOBS} `sbatch --wrap=true` until squeue lists none "
            "(4 CPUs on 2 nodes)"
        )

    return _guard(fig, body)
