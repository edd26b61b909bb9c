"""The Slurm runtime's task samples come from ``run/usage``, a file the task's own account writes on its node: only
two finite, non-negative numbers count, and a link there is never followed (it is read as root). Its placement
(``run/placement``, the same account's) counts only where it names a node of the cluster at that node's own
address, and only GPU indices that can be a bit of ``containerGpus``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_jupyter.cluster.runtime.base import TaskHandle, TaskSample, Where
from pai_jupyter.cluster.runtime.slurm import SlurmRuntime, placement


def _sample(tmp_path: Path, text: str | None) -> TaskSample | None:
    (tmp_path / "run").mkdir(exist_ok=True)
    if text is not None:
        (tmp_path / "run" / "usage").write_text(text)
    return SlurmRuntime().sample(TaskHandle("slurm", "7", {"task_dir": str(tmp_path)}))


def test_the_wrappers_numbers_are_the_sample(tmp_path: Path) -> None:
    assert _sample(tmp_path, "12.34 104857600\n") == TaskSample(12.34, 104857600)


@pytest.mark.parametrize("text", [None, "", "1.5", "nan 10", "inf 10", "-1 10", "2 -5", "2 1.5", "x y", "1 2 3"])
def test_what_a_task_may_have_written_instead_is_no_sample(tmp_path: Path, text: str | None) -> None:
    assert _sample(tmp_path, text) is None


def test_a_link_in_place_of_the_file_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "root-only"
    secret.write_text("5 5\n")
    (tmp_path / "task" / "run").mkdir(parents=True)
    (tmp_path / "task" / "run" / "usage").symlink_to(secret)
    assert SlurmRuntime().sample(TaskHandle("slurm", "7", {"task_dir": str(tmp_path / "task")})) is None
    assert SlurmRuntime().sample(TaskHandle("slurm", "7", {})) is None  # a handle found again without its dir


def _placed(
    tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch, nodes: str = "n1=10.0.0.1 n2=10.0.0.2"
) -> Where | None:
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "placement").write_text(text)
    runtime = SlurmRuntime()
    monkeypatch.setattr(runtime, "node_addrs", lambda: nodes)  # (sinfo's answer)
    return runtime._placed(tmp_path)


def test_a_placement_counts_where_it_names_a_node_at_its_own_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _placed(tmp_path, "n2 10.0.0.2 1,0\n", monkeypatch) == Where("n2", "10.0.0.2", [1, 0])
    for false in ("n1 6.6.6.6 0", "n9 10.0.0.1", "n1 10.0.0.2"):
        assert _placed(tmp_path, false, monkeypatch) is None, false
    assert _placed(tmp_path, "n9 6.6.6.6", monkeypatch, nodes="") == Where("n9", "6.6.6.6", [])  # nothing to check


def test_only_gpu_indices_that_fit_a_mask_count(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "placement").write_text("n1 10.0.0.1 99999999,7,\u00b2,3,7,64,-1\n")
    assert placement(tmp_path) == Where("n1", "10.0.0.1", [7, 3])  # before: 1 << 99999999 in every job detail
