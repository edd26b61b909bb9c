"""A full disk, on a real 24 MB tmpfs: before, a task whose processes had ended stayed RUNNING
holding capacity, DELETE was refused (409), every submit got a generic 500, and the daemon would not start."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import read_runtime

from .conftest import Api, kill_leftovers, start_daemon, v1

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


def fill(disk: Path) -> None:
    """Write until the file system says no space is left."""
    subprocess.run(["dd", "if=/dev/zero", f"of={disk}/filler", "bs=64k"], capture_output=True)
    assert os.statvfs(disk).f_bavail == 0


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
