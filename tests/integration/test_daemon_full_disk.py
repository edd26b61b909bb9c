"""A full disk, on a real 24 MB tmpfs: before, a task whose processes had ended stayed RUNNING
holding capacity, DELETE was refused (409), every submit got a generic 500, and the daemon would not start. And
when the disk stayed full after the reserve was spent, a task's end was lost ("Task exception was never
retrieved") and its job stayed RUNNING, holding its CPUs, until a restart, even once space came back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.core.space import RESERVE_NAME
from pai_jupyter.cluster.paths import read_runtime
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1
from tests.polling import wait_for

FLOOR_MB = 6


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(disk: Path, name: str = "filler") -> None:
    """Write until the file system says no space is left."""
    subprocess.run(["dd", "if=/dev/zero", f"of={disk}/{name}", "bs=64k"], capture_output=True)
    assert os.statvfs(disk).f_bavail == 0


def log_elsewhere(home: Path, tmp_path: Path) -> Path:
    """The daemon's log off the small disk (what it says while that disk is full must be kept); its path."""
    (home / "local").mkdir(parents=True)
    log = tmp_path / "daemon.log"
    log.touch()
    (home / "local" / "daemon.log").symlink_to(log)
    return log


def start(home: Path) -> Api:
    return start_daemon(home, extra_args=["--min-free-mb", str(FLOOR_MB)])


def test_a_full_disk_gives_clear_errors_and_running_tasks_still_finish(small_disk: Path) -> None:
    home = small_disk / "home"
    try:
        api = start(home)
        job = api.submit_ok(v1("runner", "touch started; while [ ! -f go ]; do sleep 0.05; done; echo done"))
        api.wait(job, ("RUNNING",))
        task_dir = next((home / "local" / "jobs").glob("*~runner/a0.main-0.t0"))
        work = task_dir / "work"
        fill(small_disk)
        (work / "go").touch()  # an empty file needs no data block: the task may end now
        d = api.wait(job, timeout=30)  # before: RUNNING for over a minute
        assert d["jobStatus"]["state"] == "SUCCEEDED", d["jobStatus"]
        info = api.http.get("/api/v2/info").json()
        assert info["used"]["cpu"] == 0  # its capacity came back
        r = api.submit(v1("more", "echo hi"))
        assert r.status_code == 507, r.text  # before: 500 UnknownError
        assert r.json()["code"] == "InsufficientStorageError"
        assert str(home / "local") in r.json()["message"] and "free" in r.json()["message"]
        r = api.http.delete(f"/api/v2/jobs/{job}")
        assert r.status_code == 200, r.text  # before: 409, the job never finished
        # the daemon restarts on the full disk (here from the CLI) and says it is short of space
        control.stop(home)
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "pai_jupyter.cli",
                "cluster",
                "start",
                "--runtime",
                "process",
                "--cpus",
                "8",
                "--min-free-mb",
                str(FLOOR_MB),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PAI_JUPYTER_HOME": str(home), "PYTHONPATH": str(Path(__file__).parents[2])},
        )
        assert cli.returncode == 0, cli.stderr
        info = read_runtime(home)
        assert info is not None
        api = Api(info["url"], info["token"], home)
        log = (home / "local" / "daemon.log").read_text()
        assert "starting short of space" in log
        assert api.submit(v1("again", "echo hi")).status_code == 507
        # space comes back: submits are taken again
        (small_disk / "filler").unlink()
        assert api.wait(api.submit_ok(v1("after", "echo ok")))["jobStatus"]["state"] == "SUCCEEDED"
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_a_task_that_ends_while_the_disk_stays_full_is_recorded_once_space_returns(
    small_disk: Path, tmp_path: Path
) -> None:
    home = small_disk / "home"
    log = log_elsewhere(home, tmp_path)
    try:
        api = start(home)
        job = api.submit_ok(v1("late", "while [ ! -f go ]; do sleep 0.05; done; echo done"))
        api.wait(job, ("RUNNING",))
        work = next((home / "local" / "jobs").glob("*~late/a0.main-0.t0")) / "work"
        reserve = home / "local" / RESERVE_NAME
        assert reserve.exists()
        fill(small_disk)
        reserve.unlink()  # spent by an earlier write, and what it gave back is taken too: the retry cannot help
        fill(small_disk, "filler2")
        (work / "go").touch()
        said = wait_for(
            lambda: text if any(w in (text := log.read_text()) for w in ("trying again", "never retrieved")) else None,
            30,
            lambda: f"the daemon to say it waits for space: {log.read_text()[-2000:]}",
        )
        assert "never retrieved" not in said, said  # before: the watcher died and the end was lost
        assert "trying again until there is space" in said, said
        held_until = time.monotonic() + 4  # the disk stays full a while: the daemon answers, the job waits
        while time.monotonic() < held_until:
            assert api.detail(job)["jobStatus"]["state"] == "RUNNING"
        for name in ("filler", "filler2"):
            (small_disk / name).unlink()
        d = api.wait(job, timeout=30)  # before: RUNNING until the daemon restarted
        assert d["jobStatus"]["state"] == "SUCCEEDED", d["jobStatus"]
        assert api.http.get("/api/v2/info").json()["used"]["cpu"] == 0  # its CPUs came back
        wait_for(reserve.exists, 30, "the reserve to be made again")
        text = log.read_text()
        assert "never retrieved" not in text and "Traceback" not in text, text
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_a_job_whose_start_finds_the_disk_full_starts_once_space_returns(small_disk: Path, tmp_path: Path) -> None:
    """The first job's end is recorded in the little space left, then the job waiting behind it starts and its
    files (a 1 MB command) do not fit. Before, its failed start could not be recorded either: the job stayed
    RUNNING with its task STARTING, holding all CPUs, until the daemon restarted, even once space came back."""
    home = small_disk / "home"
    log = log_elsewhere(home, tmp_path)
    try:
        api = start(home)
        first = api.submit_ok(v1("first", "while [ ! -f go ]; do sleep 0.05; done", cpuNumber=8))
        api.wait(first, ("RUNNING",))
        behind = api.submit_ok(v1("behind", "echo started # " + "x" * (1 << 20), cpuNumber=8))
        assert api.detail(behind)["jobStatus"]["state"] == "WAITING"  # all CPUs are the first job's
        work = next((home / "local" / "jobs").glob("*~first/a0.main-0.t0")) / "work"
        gap = small_disk / "gap"  # room for the first job's end, not for the next one's command
        subprocess.run(["dd", "if=/dev/zero", f"of={gap}", "bs=64k", "count=4"], capture_output=True, check=True)
        fill(small_disk)
        (home / "local" / RESERVE_NAME).unlink()
        fill(small_disk, "filler2")
        (work / "go").touch()
        wait_for(lambda: "trying again until there is space" in log.read_text(), 30, "the first job's end to wait")
        gap.unlink()
        assert api.wait(first, timeout=30)["jobStatus"]["state"] == "SUCCEEDED"
        wait_for(
            lambda: "starting main[0] of job" in log.read_text() or "Exception in callback" in log.read_text(),
            30,
            lambda: f"the next job's start to meet the full disk: {log.read_text()[-2000:]}",
        )
        assert api.detail(behind)["jobStatus"]["state"] in ("WAITING", "RUNNING")  # not FAILED: it waits for room
        for name in ("filler", "filler2"):
            (small_disk / name).unlink()
        d = api.wait(behind, timeout=30)  # before: RUNNING, its task STARTING, until the daemon restarted
        assert d["jobStatus"]["state"] == "SUCCEEDED", d["jobStatus"]
        assert api.http.get("/api/v2/info").json()["used"]["cpu"] == 0
        text = log.read_text()
        assert "Exception in callback" not in text and "Traceback" not in text, text
    finally:
        control.stop(home)
        kill_leftovers(home)
