"""gpuIdle's settings (local/cluster.yaml) and which jobs count as interactive (cluster/core/gpuidle.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pai_jupyter.cluster.core.gpuidle import GpuIdle, GpuIdleConfig, gpu_idle
from pai_jupyter.cluster.core.sharing import INTERACTIVE_KEY, KERNEL_KEY, is_interactive
from pai_jupyter.protocol import Job, TaskRole


def _job(extras: dict[str, object]) -> Job:
    """(extras set after validation: only which keys are there matters here, not each plugin's parameters)"""
    return Job(name="j", image="python:3.11", task_roles=[TaskRole(name="main", command="true")]).model_copy(
        update={"extras": extras}
    )


def test_off_by_default_and_read_from_cluster_yaml(tmp_path: Path) -> None:
    assert not GpuIdleConfig.load(tmp_path).enabled
    (tmp_path / "cluster.yaml").write_text("gpuIdle: {afterMinutes: 30, underPercent: 10, everySeconds: 0}\n")
    config = GpuIdleConfig.load(tmp_path)
    assert config.enabled and config.after_minutes == 30 and config.under_percent == 10
    assert config.warn_minutes == 5 and config.every_seconds == 1  # at least one second between samples


def test_off_where_the_tasks_gpus_are_other_nodes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """On Slurm a task's GPU indices are its node's: sampled here they would be this machine's GPUs, and a busy
    job could be stopped as idle."""
    (tmp_path / "cluster.yaml").write_text("gpuIdle: {afterMinutes: 30, sampler: 'builtins:dict'}\n")

    def cluster(local_gpus: bool) -> Any:
        return cast(Any, SimpleNamespace(runtime=SimpleNamespace(name="slurm", local_gpus=local_gpus)))

    assert isinstance(gpu_idle(cluster(True), tmp_path), GpuIdle)
    assert gpu_idle(cluster(False), tmp_path) is None
    assert "gpuIdle is off: the slurm runtime's tasks hold GPUs of other nodes" in caplog.text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("gpuIdle: {afterMinute: 30}\n", "unknown keys ['afterMinute']"),
        ("gpuIdle: {afterMinutes: -1}\n", "gpuIdle.afterMinutes must be a number >= 0"),
        ("gpuIdle: {underPercent: yes}\n", "gpuIdle.underPercent must be a number >= 0"),
        ("gpuIdle: 30\n", "gpuIdle must be a mapping"),
    ],
)
def test_a_bad_setting_says_which(tmp_path: Path, text: str, words: str) -> None:
    (tmp_path / "cluster.yaml").write_text(text)
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        GpuIdleConfig.load(tmp_path)


def test_which_jobs_are_interactive() -> None:
    assert is_interactive(_job({INTERACTIVE_KEY: True}))
    assert is_interactive(_job({KERNEL_KEY: {"kernelName": "python3"}}))
    assert is_interactive(_job({"com.microsoft.pai.runtimeplugin": [{"plugin": "jupyter"}]}))
    assert not is_interactive(_job({KERNEL_KEY: {}, INTERACTIVE_KEY: False}))  # opted out
    assert not is_interactive(_job({"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh"}]}))
    assert not is_interactive(_job({}))
