"""One daemon per home: racing starts from the CLI, a kernel's client and the server
extension's path (control.start) all end with one daemon, which every one of them attaches to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import lock_holder, read_runtime
from tests.helpers.daemon import kill_leftovers

ROOT = Path(__file__).parents[2]
STARTERS = {
    "cli": [sys.executable, "-m", "pai_jupyter.cli", "cluster", "start", "--runtime", "process", "--cpus", "8"],
    "control": [
        sys.executable,
        "-c",
        "from pai_jupyter.cluster import control; print('pid', control.start(runtime='process', cpus=8)['pid'])",
    ],
    "kernel": [
        sys.executable,
        "-c",
        "from pai_jupyter.client import Client; c = Client(); print('jobs', len(c.list_jobs()))",
    ],
}


def daemons_of(home: Path) -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "pai_jupyter.cluster.daemon" in cmd and str(home) in cmd:
            found.append(p.pid)
    return found


def test_parallel_starts_give_one_daemon_and_stop_stops_it(tmp_path: Path) -> None:
    home = tmp_path / "pai-home"
    env = {**os.environ, "PAI_JUPYTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    try:
        for round_ in range(3):
            procs = [
                subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for argv in (*STARTERS.values(), STARTERS["cli"], STARTERS["control"])
            ]
            outs = [p.communicate(timeout=120) for p in procs]
            assert all(p.returncode == 0 for p in procs), outs
            info = read_runtime(home)
            assert info is not None
            assert daemons_of(home) == [info["pid"]], f"round {round_}: {daemons_of(home)} vs {info['pid']}"
            assert lock_holder(home / "local") == info["pid"]
            for (out, _), argv in zip(outs, (*STARTERS.values(), STARTERS["cli"], STARTERS["control"]), strict=True):
                if "control.start" in argv[-1]:
                    assert f"pid {info['pid']}" in out  # every racer attached to the one winner
            assert control.stop(home)
            assert daemons_of(home) == [] and lock_holder(home / "local") is None
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_a_second_daemon_on_a_held_home_exits_and_says_why(tmp_path: Path) -> None:
    home = tmp_path / "pai-home"
    try:
        info = control.start(home, runtime="process", cpus=8)
        done = subprocess.run(
            [sys.executable, "-m", "pai_jupyter.cluster.daemon", "--home", str(home), "--runtime", "process"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 75
        assert f"another daemon (pid {info['pid']}) already serves" in done.stderr
        assert control.running(home)["pid"] == info["pid"]  # type: ignore[index]
        # `pai cluster status` says which enforcement is in force
        status = subprocess.run(
            [sys.executable, "-m", "pai_jupyter.cli", "cluster", "status"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PAI_JUPYTER_HOME": str(home), "PYTHONPATH": str(ROOT)},
        )
        assert "memory limit:" in status.stdout and "escaped processes:" in status.stdout, status.stdout
    finally:
        control.stop(home)
        kill_leftovers(home)
