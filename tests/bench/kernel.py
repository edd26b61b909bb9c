"""P14: a notebook kernel that runs as a PAI job (pai_jupyter.kernel) beside a local ipykernel.

Each sample starts a kernel with jupyter_client's AsyncKernelManager, waits for the kernel to answer and runs a
first cell: start is the time from ``start_kernel`` (for the PAI kernel: the job's submit) to that first
``execute_reply``. Then ``ROUND_TRIPS`` trivial cells (``1 + 1``) are timed one by one: execute_request ->
execute_reply. The baseline is the same with the local ``python3`` kernelspec (ipykernel from this venv, a plain
child process). The PAI kernel runs on the embedded cluster's process runtime, started fresh for the benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

from .common import Daemon, Figure, median, ratio

RUNS = 3
ROUND_TRIPS = 20
_cache: dict[str, Any] = {}


async def _sample(kernel_name: str, cwd: str) -> tuple[float, list[float], str]:
    """(start -> first execute_reply seconds, round trip seconds of each trivial cell, job id or '')."""
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(kernel_name=kernel_name)
    t0 = time.perf_counter()
    await km.start_kernel(cwd=cwd)
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=120)
        reply = await kc.execute_interactive("pass", timeout=60, output_hook=lambda m: None)
        start = time.perf_counter() - t0
        assert reply["content"]["status"] == "ok", reply["content"]
        trips = []
        for _ in range(ROUND_TRIPS):
            t1 = time.perf_counter()
            reply = await kc.execute_interactive("1 + 1", timeout=60, output_hook=lambda m: None)
            trips.append(time.perf_counter() - t1)
            assert reply["content"]["status"] == "ok", reply["content"]
        job = getattr(km.provisioner, "job_id", None) or ""
    finally:
        kc.stop_channels()
        await km.shutdown_kernel()
    return start, trips, job


@contextlib.contextmanager
def _kernel_env(name: str) -> Iterator[tuple[Daemon, str]]:
    """A fresh daemon and a private Jupyter data dir (where the kernelspecs go), set in this process's environment
    for the block and restored after it."""
    saved = {k: os.environ.get(k) for k in ("PAI_JUPYTER_HOME", "JUPYTER_DATA_DIR", "JUPYTER_PATH")}
    with Daemon(name, cpus=2) as d, tempfile.TemporaryDirectory(prefix=f"pai-bench-{name}-") as tmp:
        os.environ.update(PAI_JUPYTER_HOME=str(d.home), JUPYTER_DATA_DIR=tmp, JUPYTER_PATH=tmp)
        try:
            yield d, tmp
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _starts(fig: Figure, value: list[tuple[float, list[float]]], baseline: list[tuple[float, list[float]]]) -> Figure:
    """A start figure: medians of the starts; met within 1 s of the baseline."""
    fig.value = median([s for s, _ in value])
    fig.baseline = median([s for s, _ in baseline])
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= f.baseline + 1.0)
    return fig


def _trips(fig: Figure, value: list[tuple[float, list[float]]], baseline: list[tuple[float, list[float]]]) -> Figure:
    """A round-trip figure: medians of every cell's round trip, in ms; met at no more than twice the baseline."""
    fig.value = 1000 * median([t for _, trips in value for t in trips])
    fig.baseline = 1000 * median([t for _, trips in baseline for t in trips])
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.ratio is not None and f.ratio <= 2)
    return fig


def _measure() -> dict[str, Any]:
    """Both kernels, RUNS times each, alternating (so a busy moment hits both alike); cached for P14R."""
    if _cache:
        return _cache
    if "pai-provisioner" not in {ep.name for ep in entry_points(group="jupyter_client.kernel_provisioners")}:
        raise RuntimeError("the pai-provisioner entry point is not installed (pip install -e . in this venv)")
    from pai_jupyter.kernel.kernelspec import install

    with _kernel_env("p14") as (d, tmp):
        install("pai-bench", memory_mb=1024)
        pai, local, jobs = [], [], []
        asyncio.run(_sample("python3", tmp))  # warm the OS file cache for both (same interpreter, same .pyc)
        for _ in range(RUNS):
            start, trips, job = asyncio.run(_sample("pai-bench", tmp))
            pai.append((start, trips))
            jobs.append(job)
            local.append(asyncio.run(_sample("python3", tmp))[:2])
        states = [d.state(j) for j in jobs]
    _cache.update(pai=pai, local=local, states=states)
    return _cache


def p14_kernel_start() -> Figure:
    fig = Figure("P14", "PAI kernel start: submit -> first execute_reply", "s", "<= local + 1 s")
    m = _measure()
    _starts(fig, m["pai"], m["local"])
    fig.note = (
        f"median of {RUNS} starts each, alternating; PAI: AsyncKernelManager.start_kernel on a "
        f"pai-provisioner kernelspec (submit, task RUNNING, heartbeat, kernel_info, first cell) on the "
        f"embedded cluster's process runtime; baseline: the local python3 kernelspec (ipykernel as a child "
        f"process); the kernels' jobs after shutdown: {', '.join(sorted(set(m['states'])))}"
    )
    return fig


def p14_round_trip() -> Figure:
    fig = Figure("P14R", "PAI kernel trivial cell round trip", "ms", "<= 2x local")
    m = _measure()
    _trips(fig, m["pai"], m["local"])
    fig.note = (
        f"median of {RUNS}x{ROUND_TRIPS} cells `1 + 1` (execute_request -> execute_reply with its iopub "
        f"messages) on the same two kernels as P14; both are ipykernel over ZMQ on loopback"
    )
    return fig


_tunnel_cache: dict[str, Any] = {}


def _measure_tunnel() -> dict[str, Any]:
    """The PAI kernel through its SSH tunnel (a profile that is remote for the provisioner, `tunnel: always`, the
    job's ssh plugin's sshd) beside the same kernel reached directly, RUNS times each, alternating."""
    if _tunnel_cache:
        return _tunnel_cache
    from pai_jupyter.client.profiles import Profile, upsert_profile
    from pai_jupyter.kernel.kernelspec import install

    with _kernel_env("p14t") as (d, tmp):
        user = d.http.get("/api/v2/info").json()["user"]
        upsert_profile(Profile(name="tunnelled", url=d.url, username=user, token=d.token))
        install("pai-bench", memory_mb=1024)
        # a profile remote for the provisioner runs the image's python, here the host's plain python3 (tasks get a
        # system PATH), which has no ipykernel: the workbench's python, as tests/integration/test_kernel.py does
        install("pai-bench-tunnel", memory_mb=1024, profile="tunnelled", tunnel="always", python=sys.executable)
        tunnel, direct = [], []
        for _ in range(RUNS):
            tunnel.append(asyncio.run(_sample("pai-bench-tunnel", tmp))[:2])
            direct.append(asyncio.run(_sample("pai-bench", tmp))[:2])
    _tunnel_cache.update(tunnel=tunnel, direct=direct)
    return _tunnel_cache


def p14_tunnel_start() -> Figure:
    fig = Figure("P14T", "PAI kernel start through its SSH tunnel", "s", "<= direct + 1 s")
    m = _measure_tunnel()
    _starts(fig, m["tunnel"], m["direct"])
    fig.note = (
        f"median of {RUNS} starts each, alternating; tunnel: a profile remote for the provisioner with "
        "`tunnel: always` (the job's ssh plugin, its sshd, asyncssh local forwards); baseline: the same "
        "kernel reached directly on the embedded profile; both on the process runtime"
    )
    return fig


def p14_tunnel_round_trip() -> Figure:
    fig = Figure("P14TR", "PAI kernel trivial cell round trip through its SSH tunnel", "ms", "<= 2x direct")
    m = _measure_tunnel()
    _trips(fig, m["tunnel"], m["direct"])
    fig.note = f"median of {RUNS}x{ROUND_TRIPS} cells `1 + 1` on the kernels of P14T"
    return fig
