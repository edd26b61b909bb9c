"""Kill -9 the daemon with 20 tasks running: on restart nothing is lost (jobs, exit codes, log lines)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import read_runtime
from tests.helpers.daemon import kill_leftovers, start_daemon, v1
from tests.polling import wait_for


def _script(lines: int, code: int) -> str:
    return f'i=1; while [ $i -le {lines} ]; do echo "line $i"; i=$((i+1)); sleep 0.1; done; exit {code}'


def test_kill_9_with_20_running_tasks_loses_nothing(pai_home: Path) -> None:
    api = start_daemon(pai_home, cpus=40)
    try:
        expected = {}
        for n in range(20):
            lines = 10 if n % 2 else 40  # half end while the daemon is down, half after it is back
            code = n % 3
            expected[api.submit_ok(v1(f"r{n}", _script(lines, code)))] = (lines, code)
        for job in expected:
            api.wait(job, ("RUNNING",), timeout=20)
        pid = read_runtime(pai_home)["pid"]
        os.kill(pid, signal.SIGKILL)
        short = [
            next(pai_home.rglob(f"*~{job.split('~')[1]}")) / "a0.main-0.t0" / "exit_code"
            for job, (lines, _) in expected.items()
            if lines == 10
        ]
        wait_for(lambda: all(f.exists() for f in short), 20, "the short tasks to end while the daemon is down")
        api = start_daemon(pai_home, cpus=40)
        for job, (lines, code) in expected.items():
            d = api.wait(job, timeout=30)
            want = "SUCCEEDED" if code == 0 else "FAILED"
            assert d["jobStatus"]["state"] == want, (job, d["jobStatus"])
            assert api.tasks(d)[0]["containerExitCode"] == code
            out = api.log(job, name="stdout").splitlines()
            assert out == [f"line {i}" for i in range(1, lines + 1)], job
        # the restarted daemon schedules new work as usual
        assert api.wait(api.submit_ok(v1("after", "echo ok")))["jobStatus"]["state"] == "SUCCEEDED"
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)


def test_stop_requested_before_a_crash_is_finished_after_restart(pai_home: Path) -> None:
    api = start_daemon(pai_home)
    try:
        job = api.submit_ok(v1("stopcrash", "trap '' TERM; sleep 30"))
        api.wait(job, ("RUNNING",))
        api.stop(job)
        os.kill(read_runtime(pai_home)["pid"], signal.SIGKILL)
        api = start_daemon(pai_home)
        assert api.wait(job, timeout=15)["jobStatus"]["state"] == "STOPPED"
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)


def _warm_shims(warm: Path) -> list[int]:
    """Pids of shims still waiting in ``warm`` (their command line names a directory in it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(warm).encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def test_warm_shims_of_a_killed_daemon_go_away(pai_home: Path) -> None:
    """Shims started ahead exit when their daemon dies (end-of-file on stdin); the next daemon removes their
    directories and starts its own, and its first job runs in one of them."""
    warm = pai_home / "local" / "warm"
    api = start_daemon(pai_home)
    try:
        wait_for(lambda: len(list(warm.glob("warm-*"))) >= 2, 20, "two warm shims")
        old_pid = read_runtime(pai_home)["pid"]
        old = {d.name for d in warm.glob("warm-*")}
        assert len(old) == 2 and all(name.startswith(f"warm-{old_pid}-") for name in old)
        waiting = _warm_shims(warm)
        assert len(waiting) == 2
        os.kill(old_pid, signal.SIGKILL)
        # a zombie's command line is empty
        wait_for(lambda: not _warm_shims(warm), 10, "the warm shims to exit with their daemon")
        api = start_daemon(pai_home)
        wait_for(
            lambda: not old & {d.name for d in warm.glob("warm-*")} and len(list(warm.glob("warm-*"))) >= 2,
            20,
            "the old warm directories swept and two new ones",
        )
        assert not old & {d.name for d in warm.glob("warm-*")}  # swept
        assert len(list(warm.glob("warm-*"))) == 2  # and refilled
        job = api.submit_ok(v1("warm-after", "echo ok"))
        assert api.wait(job)["jobStatus"]["state"] == "SUCCEEDED"
        assert api.log(job, name="stdout").splitlines()[-1] == "ok"
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)
