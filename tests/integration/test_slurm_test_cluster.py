"""The test Slurm cluster itself (tests/slurm/cluster.sh): two started at once in two directories both run, each on a
bridge, subnet and ports of its own, and leave nothing behind when stopped (no daemon, bridge or namespace). Before,
every cluster took the same bridge and addresses: a second one (``make slurm-lab`` beside ``make bench`` or a test
run) failed to start. A cluster killed without a stop leaves its slot to the next one, which clears its network."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from ..polling import wait_for
from ..slurm.fixture import SCRIPT, need_slurm

pytestmark = [pytest.mark.slurm]


def _cluster(d: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", str(SCRIPT), *args, str(d)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _network(d: Path) -> dict[str, str]:
    lines = (d / "run" / "network").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _sinfo(d: Path) -> str:
    env = {**os.environ, "SLURM_CONF": str(d / "etc" / "slurm.conf")}
    return subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t %o"], env=env, capture_output=True, text=True).stdout


def _pids(d: Path) -> set[int]:
    """The cluster's own processes: the daemons it started and its slot's holder (by their saved pids)."""
    return {int(f.read_text()) for f in (d / "run").glob("*.pid")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _of_cluster(d: Path) -> list[int]:
    """Any process still running for the cluster in ``d`` (its conf or directory in its environment or command)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            seen = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(d).encode() in seen:
            found.append(int(proc.name))
    return found


def _links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def _namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _started(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err


def test_two_clusters_run_side_by_side_and_leave_nothing_behind(tmp_path: Path) -> None:
    need_slurm()
    dirs = [tmp_path / name for name in ("a", "b", "c")]
    for d in dirs:
        d.mkdir()
        d.chmod(0o755)
    a, b, c = dirs
    try:
        _started([_cluster(a, "start"), _cluster(b, "start")])  # at the same time
        nets = [_network(a), _network(b)]
        for key in ("slot", "port", "subnet"):
            assert nets[0][key] != nets[1][key], nets
        for d, net in zip((a, b), nets, strict=True):
            said = _sinfo(d)
            assert said.count(" idle ") == 2, said
            if net["subnet"] != "loopback":  # each node an address on its own cluster's subnet
                prefix = net["subnet"].rsplit(".", 1)[0] + "."
                assert [line.split()[2].startswith(prefix) for line in said.splitlines()] == [True, True], said
                assert f": {net['bridge']}:" in _links() and set(net["netns"].split()) <= set(_namespaces())
        # both take a job across their two nodes at once
        runs = [
            subprocess.Popen(
                ["srun", "-N2", "-n2", "hostname"],
                env={**os.environ, "SLURM_CONF": str(d / "etc" / "slurm.conf")},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for d in (a, b)
        ]
        for r in runs:
            out, err = r.communicate(timeout=120)
            assert r.returncode == 0 and len(out.split()) == 2, err
        # a start in a running cluster's directory says so and leaves that cluster running
        again = _cluster(a, "start")
        _, err = again.communicate(timeout=60)
        assert again.returncode != 0 and "already runs" in err and nets[0]["slot"] in err, err
        # (a node may still be completing the srun's job step: idle once it has)
        wait_for(lambda: _sinfo(a).count(" idle ") == 2, 30, lambda: f"both nodes of a idle: {_sinfo(a)}")
        # a cluster killed without a stop: the next one takes its slot and clears what it left
        killed = _pids(a)
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not any(_alive(p) for p in killed), 30, "the killed cluster's processes to go")
        _started([_cluster(c, "start")])
        assert _network(c)["slot"] == nets[0]["slot"], (_network(c), nets)
        assert _sinfo(c).count(" idle ") == 2
        pids = _pids(b) | _pids(c)
        nets.append(_network(c))
    finally:
        stops = [_cluster(d, "stop") for d in dirs]
        for p in stops:
            p.communicate(timeout=120)
    assert not [p for p in pids if _alive(p)]
    assert not [p for d in dirs for p in _of_cluster(d)]
    for net in nets:
        if net["subnet"] != "loopback":
            assert f": {net['bridge']}:" not in _links() and f"{net['bridge']}v" not in _links()
            assert not set(net["netns"].split()) & set(_namespaces())
