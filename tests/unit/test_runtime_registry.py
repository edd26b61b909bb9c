"""Runtimes are picked by name (``--runtime``/``--backend``, ``backend:`` in cluster.yaml) from one registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_jupyter.cluster import daemon
from pai_jupyter.cluster.runtime import registry
from pai_jupyter.cluster.runtime.base import LOOPBACK, Batch


def test_the_builtin_runtimes_are_registered_by_name() -> None:
    assert {"process", "docker", "slurm"} <= set(registry.names())
    made = daemon.pick_runtime("process", registry.Options(memory_enforcement="watchdog"))
    assert made.name == "process" and not isinstance(made, Batch) and made.host_ip == LOOPBACK
    made.close()


def test_an_unknown_runtime_names_the_known_ones() -> None:
    with pytest.raises(SystemExit, match="no runtime named 'nope' \\(known: docker, process, slurm"):
        daemon.pick_runtime("nope", registry.Options())


def test_the_cluster_config_names_the_backend(tmp_path: Path) -> None:
    assert daemon.configured_backend(tmp_path) is None
    (tmp_path / "cluster.yaml").write_text("backend: slurm\nvirtualClusters: {}\n")
    assert daemon.configured_backend(tmp_path) == "slurm"


def test_the_cluster_config_sets_the_task_port_range_of_any_runtime(tmp_path: Path) -> None:
    assert daemon.configured_task_ports(tmp_path) is None
    plain = daemon.pick_runtime("process", registry.Options())
    assert plain.task_ports is None and plain.ports().room() is None  # any free port of this host
    (tmp_path / "cluster.yaml").write_text("taskPorts: 21000-21999\n")
    span = daemon.configured_task_ports(tmp_path)
    assert span == (21000, 21999)
    ranged = daemon.pick_runtime("process", registry.Options(task_ports=span))
    assert ranged.ports().span == (21000, 21999)
    (tmp_path / "cluster.yaml").write_text("taskPorts: 22\n")
    with pytest.raises(SystemExit, match=r"cluster.yaml: taskPorts: 22 is not a range of ports like 20000-29999"):
        daemon.configured_task_ports(tmp_path)


def test_slurm_tasks_ports_stay_below_the_ephemeral_range_by_default() -> None:
    from pai_jupyter.cluster.runtime.slurm import SlurmRuntime

    assert SlurmRuntime.task_ports == (20000, 29999)


@pytest.mark.parametrize(("text", "wrong"), [("- a\n- b\n", "must be a mapping"), ("a: [\n", "not YAML")])
def test_a_cluster_config_that_is_no_mapping_says_so(tmp_path: Path, text: str, wrong: str) -> None:
    from pai_jupyter.cluster.paths import cluster_config

    assert cluster_config(tmp_path) == {}
    (tmp_path / "cluster.yaml").write_text("")
    assert cluster_config(tmp_path) == {}
    (tmp_path / "cluster.yaml").write_text(text)
    with pytest.raises(ValueError, match=f"{tmp_path / 'cluster.yaml'}: {wrong}"):
        cluster_config(tmp_path)
