"""P23 what tracking every job as an MLflow run costs (docs/tracking.md): a 200-job drain with and without it (P23),
and a job logging 10,000 metric points into its run beside a bare MLflow client logging them (P23M).

Both start a daemon with ``--mlflow on`` in a temp home (P23's baseline drains: ``--mlflow off``), whose MLflow server
runs from the task tools' Python (``PAI_JUPYTER_TASK_TOOLS``, as tests/integration/test_tracking.py does; where the
daemon is root, as an account of its own, which is removed with the home); nothing is measured before that server
answers and its processes are quiet."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from pai_jupyter.cluster import control
from pai_jupyter.cluster.core.accounts import UidRanges
from pai_jupyter.cluster.core.hostaccounts import HomeAccounts
from pai_jupyter.cluster.paths import local_dir

from .common import FINAL, Daemon, Figure, kill_task_leftovers, median, ratio, v1
from .load import P2_THREADS, _submitters

TASK_TOOLS = os.environ.get("PAI_TEST_TASK_TOOLS", "/opt/pai-task-tools")  # .ci/run installs mlflow there
PYTHON = f"{TASK_TOOLS}/bin/python3"  # what the tasks run (a user's image with mlflow in it)
SERVER_WAIT_S = 180.0  # the server's first start makes two SQLite databases (8-33 s, docs/tracking.md)
SETTLE_WINDOW_S = 1.0  # the server is quiet once its processes used under 10% of a core over such a window
SETTLE_QUIET = 0.1
SETTLE_MOST_S = 60.0
P23_JOBS = 200
P23_DRAIN_WAIT_S = 180.0
P23_SYNC_WAIT_S = 300.0  # the run updates still queued in the daemon once the jobs are final
P23M_POINTS = 10_000
P23M_BATCH = 1000  # MLflow's limit of metrics in one log_batch request
P23M_SINGLE = 200  # points logged one request each (mlflow.log_metric), timed apart for the note

# the job's code and the baseline's, the same text run by the same Python: mlflow.start_run() is the job's own run in a
# task (MLFLOW_RUN_ID) and a new run in MLFLOW_EXPERIMENT_ID outside one; the clock is around the logging only
LOGGER = textwrap.dedent(
    """
    import os, sys, time
    import mlflow
    from mlflow.entities import Metric

    points, per, single = map(int, sys.argv[1:4])
    run = mlflow.start_run()
    client = mlflow.MlflowClient()
    t0 = time.perf_counter()
    for start in range(0, points, per):
        now = int(time.time() * 1000)
        batch = [Metric("loss", 1.0 / (i + 1), now, i) for i in range(start, min(points, start + per))]
        client.log_batch(run.info.run_id, metrics=batch)
    batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(single):
        mlflow.log_metric("one_by_one", 1.0 / (i + 1), step=i)
    one_by_one = time.perf_counter() - t0
    print("P23M", run.info.run_id, os.environ.get("PAI_MLFLOW_RUN_ID", "-"), batched, one_by_one, flush=True)
    """
)


class TrackedDaemon(Daemon):
    """A bench daemon started with ``--mlflow on|off``; with ``on``, its MLflow server answering and quiet before it is
    used, and the OS accounts it made (the server's, where it is root) removed with its home."""

    def __init__(self, label: str, *, mlflow: str, cpus: int = 2) -> None:
        super().__init__(label, cpus=cpus)
        self.mlflow = mlflow
        self.kwargs["extra_args"] = ["--mlflow", mlflow]
        self.server = ""
        self.server_ready_s = 0.0
        self.settled_s, self.server_procs = 0.0, 0

    def __enter__(self) -> TrackedDaemon:
        if self.mlflow == "on" and not Path(TASK_TOOLS, "bin", "mlflow").exists():
            raise RuntimeError(f"no mlflow in the task tools at {TASK_TOOLS} (.ci/run installs it there)")
        saved = os.environ.get("PAI_JUPYTER_TASK_TOOLS")
        os.environ["PAI_JUPYTER_TASK_TOOLS"] = TASK_TOOLS  # the daemon's: its MLflow server runs from there
        try:
            t0 = time.perf_counter()
            super().__enter__()
        finally:
            if saved is None:
                os.environ.pop("PAI_JUPYTER_TASK_TOOLS", None)
            else:
                os.environ["PAI_JUPYTER_TASK_TOOLS"] = saved
        if self.mlflow == "on":
            try:
                self.server = str(self.info.get("mlflow") or "")
                if not self.server:
                    raise RuntimeError(f"the daemon started with --mlflow on names no MLflow server: {self.info}")
                deadline = time.monotonic() + SERVER_WAIT_S
                while not _answers(self.server):
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the MLflow server did not answer within {SERVER_WAIT_S:.0f} s")
                    time.sleep(0.2)
                self.server_ready_s = time.perf_counter() - t0
                self.settled_s, self.server_procs = _settle(self.home)
            except BaseException:
                self.cleanup()
                raise
        return self

    def started(self) -> str:
        """How long the MLflow server took to start, for a note."""
        return (
            f"MLflow server answered {self.server_ready_s:.1f} s after the daemon's start began and was quiet "
            f"{self.settled_s:.1f} s later ({self.server_procs} processes), before anything was measured"
        )

    def tracking(self) -> dict[str, Any]:
        """The caller's MLflow credentials and experiment (``GET /api/v2/local/tracking``, as ``pai mlflow env``);
        the first call makes the user's MLflow account and experiment."""
        r = self.http.get("/api/v2/local/tracking")
        r.raise_for_status()
        return dict(r.json())

    def stdout(self, job: str) -> str:
        """The stdout of the job's only task."""
        attempt = self.http.get(f"/api/v2/jobs/{job}").json()["jobStatus"]["attemptId"]
        r = self.http.get(f"/api/v2/jobs/{job}/attempts/{attempt}/taskRoles/main/taskIndex/0/attempts/0/logs")
        r.raise_for_status()
        uri = {loc["name"]: loc["uri"] for loc in r.json()["locations"]}["stdout"]
        r = self.http.get(uri)
        r.raise_for_status()
        return r.text

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            control.stop(self.home)
        kill_task_leftovers(self.home)
        remove_accounts(self.home)
        super().cleanup()


def remove_accounts(home: Path) -> None:
    """Remove the OS accounts the daemon of ``home`` made (a root daemon's: the MLflow server's, its users')."""
    if os.geteuid() != 0:
        return
    with contextlib.suppress(Exception):
        for pw in HomeAccounts(local_dir(home), UidRanges.read().system).made():
            deadline = time.monotonic() + 10  # userdel refuses (8) while a killed process is still exiting
            while subprocess.run(["userdel", pw.pw_name], capture_output=True).returncode not in (0, 6):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)


def _server(home: Path) -> psutil.Process:
    """The MLflow server's first process (the daemon's record of it)."""
    return psutil.Process(int(json.loads((local_dir(home) / "mlflow-server.json").read_text())["pid"]))


def _tree(root: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [root, *root.children(recursive=True)]
    return [root]


def _cpu(procs: list[psutil.Process]) -> float:
    """The CPU seconds (user + system) these processes used so far."""
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system
    return total


def _settle(home: Path) -> tuple[float, int]:
    """Wait (at most ``SETTLE_MOST_S``) until the MLflow server's processes are quiet: it answers /health before its
    worker has imported all it needs (seconds of CPU on a small machine that would otherwise fall on the first
    figure). The seconds waited and how many processes the server is."""
    root = _server(home)
    t0 = time.monotonic()
    while time.monotonic() - t0 < SETTLE_MOST_S:
        before = _cpu(_tree(root))
        time.sleep(SETTLE_WINDOW_S)
        if _cpu(_tree(root)) - before < SETTLE_QUIET * SETTLE_WINDOW_S:
            break
    return time.monotonic() - t0, len(_tree(root))


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _mlflow(tracking: dict[str, Any]) -> httpx.Client:
    """A bare caller of MLflow's REST API with the user's own credentials."""
    return httpx.Client(
        base_url=tracking["url"], auth=(tracking["username"], tracking["password"]), timeout=60, trust_env=False
    )


def _runs(http: httpx.Client, experiment: str) -> list[dict[str, Any]]:
    """Every run of the experiment (its info), page by page."""
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        body: dict[str, Any] = {"experiment_ids": [experiment], "max_results": 1000}
        if token:
            body["page_token"] = token
        r = http.post("/api/2.0/mlflow/runs/search", json=body)
        r.raise_for_status()
        page = r.json()
        found += [run["info"] for run in page.get("runs", [])]
        token = page.get("next_page_token")
        if not token:
            return found


def _unfinished(http: httpx.Client, experiment: str, most: int = 1) -> int:
    """How many of the experiment's runs are not FINISHED (at most ``most``: 1 asks only whether any is)."""
    body = {"experiment_ids": [experiment], "filter": "attributes.status != 'FINISHED'", "max_results": most}
    r = http.post("/api/2.0/mlflow/runs/search", json=body)
    r.raise_for_status()
    return len(r.json().get("runs", []))


@dataclass
class Drain:
    wall: float  # the gate's completedTime -> the last job's completedTime (s)
    last_end: float  # the last job's completedTime (epoch s)
    first_launch_ms: float  # the first queued job launched this long after the gate ended
    submit_s: float  # the REST submissions, before the clock
    queued: int
    states: dict[str, int]
    daemon_cpu: float  # the daemon's CPU seconds from the gate's end to the jobs all final (its tasks not counted)
    server_cpu: float | None  # the MLflow server's (all its processes) meanwhile; None without one


def _drain(d: TrackedDaemon, tmp: Path, prefix: str) -> Drain:
    """P2's drain: ``P23_JOBS`` one-task `true` jobs queued behind a gate job holding both CPUs, then released."""
    gate_file = tmp / f"{prefix}-open"
    gate = d.submit(v1(f"{prefix}-gate", f"while [ ! -e {gate_file} ]; do sleep 0.005; done", cpu=2))
    d.wait(gate, ("RUNNING",), timeout=60)
    per = P23_JOBS // P2_THREADS
    s0 = time.time()
    _submitters(d, lambda k, i: f"{prefix}-{k}-{i}" if i < per else None, "true", P2_THREADS)
    submit_s = time.time() - s0
    queued = d.count(("WAITING",))
    daemon = [psutil.Process(d.pid)]
    server = _tree(_server(d.home)) if d.mlflow == "on" else []
    cpu0 = _cpu(daemon), _cpu(server)
    gate_file.touch()
    poller = d.client()
    deadline = time.monotonic() + P23_DRAIN_WAIT_S
    while d.count(tuple(FINAL), poller) < P23_JOBS + 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not all {P23_JOBS} jobs were final after {P23_DRAIN_WAIT_S:.0f} s")
        time.sleep(0.02)
    daemon_cpu, server_cpu = _cpu(daemon) - cpu0[0], _cpu(server) - cpu0[1]
    items = d.http.get("/api/v2/jobs", params={"limit": "1000"}).json()
    states: dict[str, int] = {}
    for it in items:
        states[it["state"]] = states.get(it["state"], 0) + 1
    opened = next(it["completedTime"] for it in items if it["name"] == f"{prefix}-gate") / 1000
    jobs = [it for it in items if it["name"] != f"{prefix}-gate"]
    last = max(it["completedTime"] for it in jobs) / 1000
    first = min(it["launchedTime"] for it in jobs) / 1000
    server_used = server_cpu if server else None
    return Drain(last - opened, last, 1000 * (first - opened), submit_s, queued, states, daemon_cpu, server_used)


def _untracked_drain(tmp: Path, label: str) -> Drain:
    with TrackedDaemon(label, mlflow="off", cpus=2) as d:
        return _drain(d, tmp, label)


def p23_drain() -> Figure:
    """200 one-task `true` jobs on 2 CPU slots drained on a daemon with ``--mlflow on`` (every job a run: made at the
    submission, RUNNING and FINISHED written in the background), vs the same drain on a daemon with ``--mlflow off``
    (one before it and one after: load drift hits both alike). P2's method: the clock runs from the gate's
    completedTime to the last job's. Then MLflow is polled until all 200 runs are FINISHED, which the note says."""
    fig = Figure("P23", f"{P23_JOBS}-job drain, every job an MLflow run", "s", "<= 1.1x untracked")
    with tempfile.TemporaryDirectory(prefix="pai-bench-p23-") as tmp_name:
        tmp = Path(tmp_name)
        before = _untracked_drain(tmp, "p23-off1")
        with TrackedDaemon("p23", mlflow="on", cpus=2) as d:
            tracking = d.tracking()  # the user's account and experiment made before the clock
            tracked = _drain(d, tmp, "p23")
            with _mlflow(tracking) as mlflow:
                first_poll = time.time()
                at_end = _unfinished(mlflow, tracking["experimentId"], 1000)
                polls = 0
                deadline = time.monotonic() + P23_SYNC_WAIT_S
                while _unfinished(mlflow, tracking["experimentId"]) and time.monotonic() < deadline:
                    polls += 1
                    time.sleep(0.1)
                synced = time.time()
                runs = [r for r in _runs(mlflow, tracking["experimentId"]) if r["run_name"] != "p23-gate"]
            poll_s = (synced - first_poll) / max(polls, 1)
            finished = sum(1 for r in runs if r["status"] == "FINISHED")
            statuses: dict[str, int] = {}
            for r in runs:
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
            names = {r["run_name"] for r in runs}
            not_tracked = sum(
                1
                for it in d.http.get("/api/v2/jobs", params={"limit": "1000"}).json()
                if it["name"] not in names and it["name"] != "p23-gate"
            )
            server = d.started()
        after = _untracked_drain(tmp, "p23-off2")
    fig.value = tracked.wall
    fig.baseline = median([before.wall, after.wall])
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.ratio is not None and f.ratio <= 1.1)
    lag = synced - tracked.last_end
    all_done = finished >= P23_JOBS
    fig.note = (
        f"{tracked.queued} jobs queued behind a gate job holding both CPUs, clock from the gate's end to the last "
        f"completedTime (P2's method); tracked: states "
        + ", ".join(f"{k} {v}" for k, v in sorted(tracked.states.items()))
        + f", {len(runs)} MLflow runs of those jobs in pai/{tracking['username']} (runs/search with the user's "
        f"credentials from GET /api/v2/local/tracking; {not_tracked} jobs without a run), run statuses "
        + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
        + "; the run updates are written in the background: "
        + (
            f"all {P23_JOBS} runs FINISHED {lag:.1f} s after the last job ended "
            if all_done
            else f"ONLY {finished} of {P23_JOBS} runs FINISHED {lag:.0f} s after the last job ended (gave up) "
        )
        + f"(the drain + that: {tracked.wall + lag:.1f} s; when the jobs were all final, "
        f"{first_poll - tracked.last_end:.1f} s after the last ended, {P23_JOBS + 1 - at_end} of the "
        f"{P23_JOBS + 1} runs (the gate's counted) were FINISHED; then MLflow was asked every {poll_s:.2f} s for "
        f"one run not FINISHED, a light query, to weigh little on the server it waits for); submitting took "
        f"{tracked.submit_s:.2f} s tracked (each submission makes its run) vs "
        f"{median([before.submit_s, after.submit_s]):.2f} s untracked, from {P2_THREADS} REST client threads, not "
        f"counted; first queued job launched {tracked.first_launch_ms:.0f} ms after the gate ended "
        f"({before.first_launch_ms:.0f}/{after.first_launch_ms:.0f} ms untracked); CPU from the gate's end to the "
        f"jobs all final: the daemon {tracked.daemon_cpu:.2f} s tracked vs {before.daemon_cpu:.2f}/"
        f"{after.daemon_cpu:.2f} s untracked, the MLflow server {tracked.server_cpu or 0.0:.2f} s (2 CPUs here); "
        f"baseline: the same drain on a "
        f"daemon with --mlflow off, the mean of one before ({before.wall:.2f} s) and one after ({after.wall:.2f} s); "
        f"the tracked daemon's {server}"
    )
    return fig


def _parse(out: str) -> tuple[str, str, float, float]:
    """(run id, PAI_MLFLOW_RUN_ID, seconds for the batched points, seconds for the points one by one)."""
    for line in out.splitlines():
        if line.startswith("P23M "):
            _, run_id, pai_run, batched, single = line.split()
            return run_id, pai_run, float(batched), float(single)
    raise RuntimeError(f"no P23M line in the output: {out[-800:]}")


def _bare_client(
    tracking: dict[str, Any], tmp: Path, points: int = P23M_POINTS, single: int = P23M_SINGLE
) -> tuple[str, float, float]:
    """The same script with the same Python outside the platform, with the user's credentials and experiment (as
    ``eval "$(pai mlflow env)"`` gives them): it makes its own run."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "MLFLOW_TRACKING_URI": tracking["url"],
        "MLFLOW_TRACKING_USERNAME": tracking["username"],
        "MLFLOW_TRACKING_PASSWORD": tracking["password"],
        "MLFLOW_EXPERIMENT_ID": str(tracking["experimentId"]),
    }
    args = [str(points), str(P23M_BATCH), str(single)]
    done = subprocess.run(
        [PYTHON, "-c", LOGGER, *args], env=env, cwd=tmp, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the bare MLflow client exited {done.returncode}: {done.stderr[-800:]}")
    run_id, _, batched, one_by_one = _parse(done.stdout)
    return run_id, batched, one_by_one


def _points(mlflow: httpx.Client, run_id: str, key: str) -> int:
    """How many points of ``key`` the run has (read back from the server)."""
    n, token = 0, None
    while True:
        params: dict[str, Any] = {"run_id": run_id, "metric_key": key, "max_results": 25000}
        if token:
            params["page_token"] = token
        r = mlflow.get("/api/2.0/mlflow/metrics/get-history", params=params)
        r.raise_for_status()
        page = r.json()
        n += len(page.get("metrics", []))
        token = page.get("next_page_token")
        if not token:
            return n


def p23m_metrics() -> Figure:
    """A job whose code logs 10,000 metric points into its run (the one the platform made: MLFLOW_RUN_ID), timed
    inside the task, vs the same code with the same Python run outside the platform by a bare MLflow client into a
    run it makes itself, on the same server with the same user's credentials (one before the job, one after)."""
    fig = Figure("P23M", f"job logging {P23M_POINTS:,} metric points to MLflow", "s", "<= 1.2x bare client")
    with tempfile.TemporaryDirectory(prefix="pai-bench-p23m-") as tmp_name, TrackedDaemon("p23m", mlflow="on") as d:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o755)  # (the bare client's HOME, cwd)
        tracking = d.tracking()
        _bare_client(tracking, tmp, P23M_BATCH, P23M_SINGLE // 10)  # the server's first requests of each kind
        base_runs = [_bare_client(tracking, tmp)]
        args = f"{P23M_POINTS} {P23M_BATCH} {P23M_SINGLE}"
        job = d.submit(v1("p23m", f"{PYTHON} -c {shlex.quote(LOGGER)} {args}", memory_mb=1024))
        state = d.wait(job, timeout=600, poll=0.1)
        out = d.stdout(job)
        if state != "SUCCEEDED":
            raise RuntimeError(f"the logging job ended {state}: {out[-800:]}")
        run_id, pai_run, batched, single = _parse(out)
        if run_id != pai_run:
            raise RuntimeError(f"the job logged into run {run_id}, not its own run {pai_run}")
        base_runs.append(_bare_client(tracking, tmp))
        with _mlflow(tracking) as mlflow:
            counts = [_points(mlflow, r, "loss") for r in (run_id, *(b[0] for b in base_runs))]
        server = d.started()
    fig.value = batched
    fig.baseline = median([b[1] for b in base_runs])
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.ratio is not None and f.ratio <= 1.2)
    base_single = median([b[2] for b in base_runs])
    fig.note = (
        f"{P23M_POINTS:,} points of one metric (steps 0-{P23M_POINTS - 1}) logged by "
        f"MlflowClient().log_batch({P23M_BATCH} Metric each, MLflow's most per request) into mlflow.start_run()'s "
        f"run: in the job, its own run (MLFLOW_RUN_ID, the run the platform made), timed inside the task "
        f"({PYTHON}, process runtime, 1 CPU); baseline: the same script with the same Python in a bare subprocess "
        f"with the user's credentials from GET /api/v2/local/tracking, into a run it made in pai/"
        f"{tracking['username']}, the mean of one before the job ({base_runs[0][1]:.2f} s) and one after "
        f"({base_runs[1][1]:.2f} s), after a warm-up run of {P23M_BATCH:,} points (the server's first requests of "
        f"each kind, not counted); points read back: " + "/".join(f"{c:,}" for c in counts) + " (job/before/after)"
        f"; one point per request (mlflow.log_metric, {P23M_SINGLE} points, timed apart): "
        f"{1000 * single / P23M_SINGLE:.1f} ms a point in the job vs {1000 * base_single / P23M_SINGLE:.1f} ms bare "
        f"({single / base_single:.2f}x; {P23M_POINTS:,} that way would take ~{P23M_POINTS * single / P23M_SINGLE:.0f}"
        f" s); the daemon's {server}"
    )
    return fig
