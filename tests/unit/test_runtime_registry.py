"""Runtimes are picked by name (``--runtime``/``--backend``, ``backend:`` in cluster.yaml) from one registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_jupyter.cluster import daemon
from pai_jupyter.cluster.runtime import registry
from pai_jupyter.cluster.runtime.base import LOOPBACK


def test_the_builtin_runtimes_are_registered_by_name() -> None:
    assert {"process", "docker", "slurm"} <= set(registry.names())
    made = daemon.pick_runtime("process", registry.Options(memory_enforcement="watchdog"))
    assert made.name == "process" and not made.gang_submit and made.host_ip == LOOPBACK
    made.close()


def test_an_unknown_runtime_names_the_known_ones() -> None:
    with pytest.raises(SystemExit, match="no runtime named 'nope' \\(known: docker, process, slurm"):
        daemon.pick_runtime("nope", registry.Options())


def test_the_cluster_config_names_the_backend(tmp_path: Path) -> None:
    assert daemon.configured_backend(tmp_path) is None
    (tmp_path / "cluster.yaml").write_text("backend: slurm\nvirtualClusters: {}\n")
    assert daemon.configured_backend(tmp_path) == "slurm"
