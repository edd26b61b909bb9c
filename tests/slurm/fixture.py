"""A real two-node Slurm cluster for a test module: ``tests/slurm/cluster.sh`` started in a temporary directory,
stopped by pid after the last test. Skips with a reason where Slurm's daemons are not installed, or (unless
``PAI_TEST_REQUIRE_SLURM=1``, as in CI) where they cannot start."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("cluster.sh")
LOCK = Path(tempfile.gettempdir(), "pai-test-slurm-cluster.lock")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo")


def _missing() -> list[str]:
    return [d for d in DAEMONS if not (shutil.which(d) or Path("/usr/sbin", d).exists())]


@contextlib.contextmanager
def one_at_a_time() -> Iterator[None]:
    """Hold the machine's one test cluster (a fixed bridge and node addresses): a second run that wants it, in
    another pytest or a stray xdist worker, waits here rather than tearing the first one's network down."""
    with LOCK.open("a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for the test Slurm cluster (another run holds {LOCK})", file=sys.stderr)
            fcntl.flock(held, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """SLURM_CONF of the running cluster (set in os.environ while the module runs)."""
    required = os.environ.get("PAI_TEST_REQUIRE_SLURM") == "1"
    missing = _missing()
    if missing:
        if required:
            pytest.fail(f"PAI_TEST_REQUIRE_SLURM=1 but Slurm is not installed ({', '.join(missing)} missing)")
        hint = "apt-get install slurmctld slurmd slurm-client munge"
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing; {hint})")
    if os.geteuid() != 0:
        pytest.skip("the test cluster's slurmd must run as root (tasks run as their users' accounts)")
    with one_at_a_time():
        d = tmp_path_factory.mktemp("slurm")
        d.chmod(0o755)  # slurmd runs a batch script from its spool dir in here as the task's account (as /var/spool)
        done = subprocess.run(["bash", str(SCRIPT), "start", str(d)], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            subprocess.run(["bash", str(SCRIPT), "stop", str(d)], capture_output=True, timeout=60)
            message = f"the test Slurm cluster did not start: {done.stderr.strip()[-800:]}"
            pytest.fail(message) if required else pytest.skip(message)
        conf = str(d / "etc" / "slurm.conf")
        old = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = conf
        try:
            yield conf
        finally:
            subprocess.run(["bash", str(SCRIPT), "stop", str(d)], capture_output=True, timeout=60)
            if old is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = old
