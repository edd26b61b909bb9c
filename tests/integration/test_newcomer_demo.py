"""``make demo`` leaves no over-provisioned cluster behind (it stops the one it started,
and leaves a running one as it was), ``pai cluster status`` says when capacity differs from the machine, and a
task the completion policy stopped says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pai_jupyter.cluster import control
from pai_jupyter.cluster.core.scheduler import machine_resources
from tests.helpers.cli import pai
from tests.helpers.daemon import kill_leftovers, start_daemon

ROOT = Path(__file__).resolve().parents[2]


def demo(home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAI_JUPYTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pai_jupyter.demo"], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )


def test_demo_stops_the_cluster_it_started_and_says_why_ps_was_stopped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    try:
        r = demo(home)
        assert r.returncode == 0, r.stdout + r.stderr
        assert control.running(home) is None  # nothing over-provisioned is left for `make lab` to reuse
        assert "The demo's cluster was stopped" in r.stdout
        ps = next(line for line in r.stdout.splitlines() if line.strip().startswith("ps[0]"))
        assert "STOPPED exit 143" in ps and "stopped because the job had ended SUCCEEDED: worker reached" in ps
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_demo_runs_on_the_2_cpu_cluster_make_lab_started(tmp_path: Path) -> None:
    """`make lab` then `make demo` on a 2-CPU machine: the 3-task example could never fit."""
    home = tmp_path / "home"
    start_daemon(home, cpus=2)
    try:
        r = demo(home)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "1 worker(s) instead of 2: the cluster has 2 CPUs" in r.stdout
        assert "worker[0] SUCCEEDED exit 0" in r.stdout
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_demo_leaves_a_running_cluster_as_it_was(tmp_path: Path) -> None:
    home = tmp_path / "home"
    api = start_daemon(home, cpus=8)  # a user's own start, big enough for the 3-task example
    try:
        before = control.running(home)
        r = demo(home)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "already running (left as it is)" in r.stdout
        assert control.running(home) == before
        assert api.http.get("/api/v2/info").json()["capacity"]["cpu"] == 8
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_cluster_status_says_when_capacity_differs_from_the_machine(tmp_path: Path) -> None:
    machine = machine_resources()
    home = tmp_path / "home"
    start_daemon(home, cpus=machine.cpu + 2, memory_mb=machine.memory_mb, gpus=machine.gpu)
    try:
        r = pai("cluster", "status", home=home)
        assert r.returncode == 0, r.stderr
        assert (
            f"note:     capacity differs from this machine ({machine.cpu + 2} CPU scheduled, the machine has "
            f"{machine.cpu})"
        ) in r.stdout
    finally:
        control.stop(home)
        kill_leftovers(home)
    start_daemon(home, cpus=None, memory_mb=None, gpus=None)  # what `pai cluster start` schedules
    try:
        r = pai("cluster", "status", home=home)
        assert r.returncode == 0 and "capacity:" in r.stdout and "differs" not in r.stdout
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_status_says_why_a_task_was_stopped_when_its_job_succeeded(tmp_path: Path) -> None:
    home = tmp_path / "home"
    start_daemon(home)
    try:
        job = ROOT / "notebooks" / "jobs" / "distributed-ps-worker.yaml"
        r = pai("submit", str(job), "--wait", home=home)
        assert r.returncode == 0, r.stderr
        r = pai("status", "ps_worker_demo", home=home)
        ps = next(line for line in r.stdout.splitlines() if line.startswith("ps "))
        assert "stopped because the job had ended SUCCEEDED" in ps
    finally:
        control.stop(home)
        kill_leftovers(home)
