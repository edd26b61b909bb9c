"""The Slurm runtime's task samples come from ``run/usage``, a file the task's own account writes on its node: only
two finite, non-negative numbers count, and a link there is never followed (it is read as root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pai_jupyter.cluster.runtime.base import TaskHandle, TaskSample
from pai_jupyter.cluster.runtime.slurm import SlurmRuntime


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
