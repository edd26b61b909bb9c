"""Shared pieces of the benchmarks: a daemon in a fresh temp home, a bare REST caller, figures, cleanup.

Every benchmark starts its own daemon through ``control.start`` (the wall time of each start is kept for the
D1 figure) and leaves nothing behind: the daemon is stopped, task process groups still running are killed,
their cgroups removed, containers made for the home removed, and the temp home deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pai_jupyter.cluster import control
from pai_jupyter.common import channel
from pai_jupyter.common.states import FINAL

IMAGE = "pai-test/busybox:latest"
# the bench's daemons track nothing unless a figure asks (an MLflow server per daemon would weigh on every figure)
os.environ.setdefault("PAI_JUPYTER_MLFLOW", "off")
BENCH_LABEL = "pai-bench=1"  # on the containers the docker baseline makes


@dataclass
class Figure:
    """One row of the table and of .bench/results.json."""

    key: str
    title: str
    unit: str
    target: str
    value: float | None = None
    baseline: float | None = None
    ratio: float | None = None
    met: bool | None = None
    note: str = ""
    runs: list[float] = field(default_factory=list)  # the value of each run (``combined``), in run order
    rule: Callable[[Figure], bool] | None = field(default=None, repr=False, compare=False)

    def judge(self, rule: Callable[[Figure], bool]) -> None:
        """The target as a rule on this figure, and this run's verdict by it; ``combined`` judges the median figure by
        the same rule, so the flag always agrees with the values shown (a majority of runs' verdicts did not: P16 was
        "missed" at a median of 1.18x for a 1.2x target)."""
        self.rule = rule
        self.met = rule(self)

    @property
    def spread(self) -> tuple[float, float] | None:
        """The lowest and highest value over the runs (None for a single run)."""
        return (min(self.runs), max(self.runs)) if len(self.runs) > 1 else None

    def as_json(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "value": r(self.value),
            "baseline": r(self.baseline),
            "ratio": r(self.ratio),
            "target": self.target,
            "unit": self.unit,
            "met": self.met,
            "runs": [r(x) for x in self.runs],
            "spread": None if self.spread is None else [r(x) for x in self.spread],
            "note": self.note,
        }


def combined(figures: list[Figure]) -> Figure:
    """One figure from several runs of the same benchmark: the median value, baseline and ratio (each run's ratio
    is to its own baseline, so load drift between runs cancels), met when those medians meet the target's rule
    (``Figure.judge``; a figure without one: when most runs met it), the note of the run whose value is the median,
    and every run's value (the spread)."""
    first = figures[0]
    done = [f for f in figures if f.value is not None]
    if not done:
        return first
    middle = sorted(done, key=lambda f: f.value or 0.0)[(len(done) - 1) // 2]
    out = Figure(first.key, first.title, first.unit, first.target, note=middle.note)
    out.runs = [f.value for f in done if f.value is not None]
    out.value = median(out.runs)
    baselines = [f.baseline for f in done if f.baseline is not None]
    out.baseline = median(baselines) if baselines else None
    ratios = [f.ratio for f in done if f.ratio is not None]
    out.ratio = median(ratios) if ratios else None
    rule = next((f.rule for f in done if f.rule is not None), None)
    verdicts = [f.met for f in done if f.met is not None]
    out.met = None if not verdicts else sum(verdicts) * 2 > len(verdicts)
    if rule is not None:
        out.rule = rule
        with contextlib.suppress(TypeError):  # (a rule on a baseline no run had: the runs' verdicts stand)
            out.met = rule(out)
    if len(figures) > 1:
        failed = len(figures) - len(done)
        out.note = (
            f"median of {len(done)} interleaved runs ({', '.join(Table.fmt(x, first.unit) for x in out.runs)}"
            + (f"; {failed} could not run" if failed else "")
            + f"); the median run's note: {middle.note}"
        )
    return out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def ratio(value: float | None, baseline: float | None) -> float | None:
    if value is None or not baseline:
        return None
    return value / baseline


def v1(name: str, command: str, *, cpu: int = 1, memory_mb: int = 256, image: str = IMAGE) -> str:
    """A one-task v1 job as JSON text (the same shape the integration tests submit)."""
    role = {
        "name": "main",
        "taskNumber": 1,
        "cpuNumber": cpu,
        "memoryMB": memory_mb,
        "gpuNumber": 0,
        "command": command,
    }
    return json.dumps({"jobName": name, "image": image, "taskRoles": [role]})


def wait_file(path: Path, timeout: float = 20.0, poll: float = 0.001, must_contain: str = "\n") -> str:
    """The text of ``path`` once it holds ``must_contain`` (written completely)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError):
            text = path.read_text()
            if must_contain in text:
                return text
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} was not written within {timeout:g} s")
        time.sleep(poll)


class Daemon:
    """A daemon in a fresh temp PAI_JUPYTER_HOME, with a bare httpx caller; use as a context manager."""

    starts: list[tuple[str, float]] = []  # (label, control.start wall seconds) of every daemon this run started

    def __init__(
        self, label: str, *, runtime: str = "process", cpus: int = 2, memory_mb: int = 8192, stop_grace: float = 0.5
    ):
        self.label, self.runtime = label, runtime
        self.kwargs = {"runtime": runtime, "cpus": cpus, "memory_mb": memory_mb, "gpus": 0, "stop_grace": stop_grace}
        self.home = Path(tempfile.mkdtemp(prefix=f"pai-bench-{label}-"))
        self.clients: list[httpx.Client] = []

    def __enter__(self) -> Daemon:
        try:
            t0 = time.perf_counter()
            info = control.start(self.home, **self.kwargs)
            Daemon.starts.append((f"{self.label}/{self.runtime}", time.perf_counter() - t0))
        except BaseException:
            self.cleanup()
            raise
        self.info = info
        self.url, self.token, self.pid = info["url"], info["token"], int(info["pid"])
        self.http = self.client()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def client(self) -> httpx.Client:
        """A new connection (one per submitting thread, as separate user scripts would have), over the daemon's
        socket as this machine's clients talk to it."""
        c = channel.http_client(self.info, timeout=60)
        self.clients.append(c)
        return c

    # ---- REST ------------------------------------------------------------------------------------------------
    def submit(self, text: str, http: httpx.Client | None = None) -> str:
        r = (http or self.http).post(
            "/api/v2/jobs", content=text.encode(), headers={"Content-Type": "application/json"}
        )
        if r.status_code != 202:
            raise RuntimeError(f"submit answered {r.status_code}: {r.text[:300]}")
        body = r.json()
        return f"{body['username']}~{body['name']}"

    def state(self, job: str) -> str:
        r = self.http.get(f"/api/v2/jobs/{job}")
        r.raise_for_status()
        return r.json()["jobStatus"]["state"]

    def wait(self, job: str, states: Collection[str] = FINAL, timeout: float = 30.0, poll: float = 0.005) -> str:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(job)
            if state in states:
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"{job} still {state} after {timeout:g} s")
            time.sleep(poll)

    def count(self, states: tuple[str, ...] | None = None, http: httpx.Client | None = None) -> int:
        params = {"withTotalCount": "true", "limit": "1"}
        if states:
            params["state"] = ",".join(states)
        r = (http or self.http).get("/api/v2/jobs", params=params)
        r.raise_for_status()
        return int(r.json()["totalCount"])

    # ---- cleanup ---------------------------------------------------------------------------------------------
    def cleanup(self) -> None:
        for c in self.clients:
            with contextlib.suppress(Exception):
                c.close()
        with contextlib.suppress(Exception):
            control.stop(self.home)
        kill_task_leftovers(self.home)
        if self.runtime == "docker":
            remove_containers(home=self.home)
        shutil.rmtree(self.home, ignore_errors=True)


def kill_task_leftovers(home: Path) -> None:
    """Kill the process group of every task still running under ``home`` and remove its cgroup.

    A task is found by its handle.json (pid and kernel start time: a pid reused since by another process is left
    alone) or, for the sh shim, its pid file while that pid is still the shim of that very task directory."""
    from pai_jupyter.cluster.runtime.base import TaskHandle
    from pai_jupyter.cluster.runtime.cgroups import TaskCgroup
    from pai_jupyter.cluster.runtime.proctree import stat as _stat

    for handle_file in home.rglob("handle.json"):
        with contextlib.suppress(ValueError, OSError, KeyError, TypeError):
            handle = TaskHandle.from_dict(json.loads(handle_file.read_text()))
            st = _stat(int(handle.id))
            if st is not None and st[1] == handle.info.get("start_ticks"):
                os.killpg(int(handle.id), signal.SIGKILL)
            cgroup = TaskCgroup.from_info(handle.info)
            if cgroup is not None:
                cgroup.remove(timeout=2.0)
    for pid_file in home.rglob("pid"):
        td = pid_file.parent
        with contextlib.suppress(ValueError, OSError):
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if str(td).encode() in cmdline:
                os.killpg(pid, signal.SIGKILL)


def remove_containers(*, home: Path | None = None, bench: bool = False) -> int:
    """Remove the daemon's containers for ``home`` (label pai.task_dir under it) or the baseline's (pai-bench)."""
    try:
        import docker

        client = docker.from_env(timeout=10)
    except Exception:
        return 0
    removed = 0
    try:
        if bench:
            found = client.containers.list(all=True, filters={"label": BENCH_LABEL})
        else:
            prefix = str(Path(home or "/nonexistent").resolve())
            found = [
                c
                for c in client.containers.list(all=True, filters={"label": "pai.managed=1"})
                if (c.labels.get("pai.task_dir") or "").startswith(prefix)
            ]
        for c in found:
            with contextlib.suppress(Exception):
                c.remove(force=True)
                removed += 1
    finally:
        client.close()
    return removed


@dataclass
class Table:
    figures: list[Figure] = field(default_factory=list)

    @staticmethod
    def fmt(x: float | None, unit: str = "") -> str:
        if x is None:
            return "-"
        if abs(x) >= 100:
            text = f"{x:.0f}"
        elif abs(x) >= 10:
            text = f"{x:.1f}"
        else:
            text = f"{x:.2f}"
        return f"{text} {unit}".rstrip()

    def row(self, f: Figure) -> list[str]:
        met = {True: "yes", False: "NO (missed)", None: "n/a"}[f.met]
        return [
            f.key,
            f.title,
            self.fmt(f.value, f.unit),
            "-" if f.spread is None else f"{self.fmt(f.spread[0])}-{self.fmt(f.spread[1], f.unit)}",
            self.fmt(f.baseline, f.unit),
            "-" if f.ratio is None else f"{f.ratio:.2f}x",
            f.target,
            met,
        ]

    def render(self, figures: list[Figure] | None = None, notes: bool = True) -> str:
        figures = self.figures if figures is None else figures
        head = ["id", "figure", "value", "spread", "baseline", "ratio", "target", "met"]
        rows = [head] + [self.row(f) for f in figures]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        if notes:
            lines += [""] + [f"{f.key}: {f.note}" for f in figures if f.note]
        return "\n".join(lines)
