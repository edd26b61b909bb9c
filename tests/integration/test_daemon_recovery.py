"""Kill -9 the daemon with 20 tasks running: on restart nothing is lost (jobs, exit codes, log lines)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import read_runtime

from .conftest import kill_leftovers, start_daemon, v1


def _script(lines: int, code: int) -> str:
    return f"i=1; while [ $i -le {lines} ]; do echo \"line $i\"; i=$((i+1)); sleep 0.1; done; exit {code}"


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
        time.sleep(2.0)
        api = start_daemon(pai_home, cpus=40)
        for job, (lines, code) in expected.items():
            d = api.wait(job, timeout=30)
            want = "SUCCEEDED" if code == 0 else "FAILED"
            assert d["jobStatus"]["state"] == want, (job, d["jobStatus"])
            assert api.tasks(d)[0]["containerExitCode"] == code
            out = api.log(job, name="stdout").splitlines()[1:]
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
