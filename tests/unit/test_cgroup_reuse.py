"""A task's cgroup once removed: a late remove() of it leaves alone another task's cgroup made under its name."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from pai_jupyter.cluster.runtime.cgroups import TaskCgroup

SHM = Path("/dev/shm")  # tmpfs: a directory made again gets a new inode, as in cgroupfs (ext4 may hand the old back)


@pytest.mark.skipif(not os.access(SHM, os.W_OK), reason="no writable tmpfs at /dev/shm")
def test_a_late_remove_spares_the_cgroup_made_again_under_its_name() -> None:
    with tempfile.TemporaryDirectory(dir=SHM) as tmp:
        first = Path(tmp) / "tester.a0.main.0.t0"
        first.mkdir()
        mine = TaskCgroup(1, [first], [first.stat().st_ino])
        stale = TaskCgroup.from_info(mine.to_info())  # (its handle, read back: a job deleted after its task ended)
        assert stale is not None and stale.inodes == mine.inodes
        assert mine.remove(0)  # the task ended: its cgroup goes
        first.mkdir()  # another task's, of the same name
        (first / "cgroup.procs").write_text(f"{os.getpid()}\n")  # (it runs: a remove would SIGKILL it)
        assert stale.pids() == set()
        assert stale.remove(0) and first.is_dir()
        old = TaskCgroup.from_info({"cgroup": str(first), "cgroup_version": 1})  # an older handle: no inodes
        assert old is not None and old.pids() == {os.getpid()}
