"""A real two-node Slurm cluster for a test module: ``tests/slurm/cluster.sh`` started in a temporary directory,
stopped by pid after the last test. Skips with a reason where Slurm's daemons are not installed, or (unless
``PAI_TEST_REQUIRE_SLURM=1``, as in CI) where they cannot start. Clusters started in different directories run
side by side (each takes a free bridge, subnet and ports: cluster.sh), so two test runs, a ``make bench`` and a
``make slurm-lab`` need no lock between them; a test asks the cluster for its nodes' addresses (``node_addrs``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("cluster.sh")
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "scontrol", "sinfo")
ACCOUNTING = ("slurmdbd", "sacctmgr", "mariadbd", "mariadb-install-db")  # cluster.sh start --accounting
GRACE_S = 10  # the accounting cluster's QOS GraceTime (PAI_SLURM_GRACE): how long a preempted job may take


def _missing(accounting: bool = False) -> list[str]:
    wanted = DAEMONS + (ACCOUNTING if accounting else ())
    return [d for d in wanted if not (shutil.which(d) or Path("/usr/sbin", d).exists())]


def node_addrs() -> dict[str, str]:
    """Each node's address in the cluster ``SLURM_CONF`` names (its NodeAddr: an IP on the cluster's own bridge,
    or 127.0.0.1 on loopback), as Slurm itself says."""
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %o"], capture_output=True, text=True, check=True).stdout
    pairs = (line.split() for line in out.splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def need_slurm(accounting: bool = False) -> bool:
    """Skip (or, with ``PAI_TEST_REQUIRE_SLURM=1``, fail) where the test cluster cannot run; whether it is required."""
    required = os.environ.get("PAI_TEST_REQUIRE_SLURM") == "1"
    missing = _missing(accounting)
    if missing:
        if required:
            pytest.fail(f"PAI_TEST_REQUIRE_SLURM=1 but Slurm is not installed ({', '.join(missing)} missing)")
        hint = "apt-get install slurmctld slurmd slurm-client munge" + (" slurmdbd mariadb-server" * accounting)
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing; {hint})")
    if os.geteuid() != 0:
        pytest.skip("the test cluster's slurmd must run as root (tasks run as their users' accounts)")
    return required


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """SLURM_CONF of the running cluster (set in os.environ while the module runs)."""
    yield from _cluster(tmp_path_factory, accounting=False)


def accounting_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """As ``slurm_cluster``, with accounting (slurmdbd + MariaDB), fair share and QOS preemption (GraceTime
    GRACE_S): a module that needs it defines its own ``slurm_cluster`` fixture that yields from this one."""
    yield from _cluster(tmp_path_factory, accounting=True)


def _cluster(tmp_path_factory: pytest.TempPathFactory, accounting: bool) -> Iterator[str]:
    required = need_slurm(accounting)
    d = tmp_path_factory.mktemp("slurm")
    d.chmod(0o755)  # slurmd runs a batch script from its spool dir in here as the task's account (as /var/spool)
    argv = ["bash", str(SCRIPT), "start", str(d), *(["--accounting"] if accounting else [])]
    env = {**os.environ, "PAI_SLURM_GRACE": str(GRACE_S)}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
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
