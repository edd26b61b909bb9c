"""Training curves from event files (TensorBoard's reader), from log lines by regex, and the plot;
a real local TensorBoard: started, reused by logdir, read over its HTTP API, embedded through the proxy URL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from pai_jupyter.client import JobDetail, NotSupported, TaskService
from pai_jupyter.notebook import curves, tensorboard
from tests.polling import wait_for


def write_scalars(run: Path, tag: str, values: list[float]) -> None:
    w = EventFileWriter(str(run))
    for step, value in enumerate(values):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        w.add_event(event_pb2.Event(wall_time=time.time(), step=step * 10, summary=summary))
    w.close()


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    write_scalars(tmp_path / "logs" / "train", "loss", [1.0, 0.5, 0.25])
    write_scalars(tmp_path / "logs" / "eval", "accuracy", [0.5, 0.75])
    return tmp_path / "logs"


def test_scalars_from_event_files(logdir: Path) -> None:
    frame = curves.from_logdir(logdir)
    assert sorted(frame["series"].unique()) == ["eval/accuracy", "train/loss"]
    loss = frame[frame["series"] == "train/loss"]
    assert list(loss["step"]) == [0, 10, 20] and list(loss["value"]) == [1.0, 0.5, 0.25]
    assert list(curves.from_logdir(logdir, tags=["accuracy"])["series"].unique()) == ["eval/accuracy"]
    figure = curves.plot(frame)
    assert [list(m.labels) for m in figure.marks] == [["eval/accuracy"], ["train/loss"]]


LOG = """epoch 1 step 100 loss=0.90 acc: 0.50
noise <b>
epoch 1 step 200 loss=0.70 acc: 0.61
loss=nan-ish
epoch 2 step 300 loss=0.40 acc: 0.80
"""


def test_metrics_from_log_lines_by_alibaba_metric_definitions() -> None:
    defs = [{"Name": "loss", "Regex": r"loss=([0-9.]+)"}, {"Name": "accuracy", "Regex": r"acc: ([0-9.]+)"}]
    frame = curves.from_log(LOG, defs)
    loss = frame[frame["series"] == "loss"]
    assert list(loss["value"]) == [0.9, 0.7, 0.4] and list(loss["step"]) == [0, 1, 2]
    by_step = curves.from_log(LOG, {"loss": r"step (?P<step>\d+) loss=(?P<value>[0-9.]+)"})
    assert list(by_step["step"]) == [100, 200, 300] and list(by_step["value"]) == [0.9, 0.7, 0.4]
    with pytest.raises(ValueError, match="needs a group"):
        curves.from_log(LOG, {"loss": r"loss=[0-9.]+"})
    with pytest.raises(ValueError, match="Name and a Regex"):
        curves.from_log(LOG, [{"Name": "loss"}])


@pytest.fixture
def local_tb(logdir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    monkeypatch.setenv("PAI_JUPYTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TENSORBOARD_PROXY_URL", raising=False)
    monkeypatch.delenv("PAI_JUPYTER_BASE_URL", raising=False)
    monkeypatch.delenv("JUPYTERHUB_SERVICE_PREFIX", raising=False)
    tb = tensorboard.local(logdir)
    yield tb
    tb.stop()


def test_a_local_tensorboard_is_started_once_per_logdir_and_read_over_http(
    local_tb: Any, logdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not local_tb.reused and local_tb.alive()
    again = tensorboard.local(str(logdir) + "/")
    assert again.reused and (again.pid, again.port) == (local_tb.pid, local_tb.port)
    assert local_tb.url == f"/proxy/{local_tb.port}/"
    assert f'src="/proxy/{local_tb.port}/"' in local_tb.embed(300).data
    monkeypatch.setenv("TENSORBOARD_PROXY_URL", "/hub/user/ann/proxy/%PORT%/")
    assert local_tb.url == f"/hub/user/ann/proxy/{local_tb.port}/"
    frames: list[Any] = []  # TensorBoard loads the runs in the background

    def loaded() -> bool:
        frames[:] = [curves.from_tensorboard(f"http://127.0.0.1:{local_tb.port}/")]
        return len(frames[0]) >= 5

    wait_for(loaded, 30, "TensorBoard to serve the five points", interval=0.5)
    frame = frames[0]
    assert sorted(frame["series"].unique()) == ["eval/accuracy", "train/loss"] and len(frame) == 5


class JobClient:
    """The calls for_job makes: job_id, services (or config + detail for servers without them)."""

    def __init__(self, services: list[dict[str, Any]] | None, config: str = "", task_state: str = "RUNNING"):
        self._services, self._config, self.task_state = services, config, task_state

    def job_id(self, job: str) -> str:
        return job if "~" in job else f"ann~{job}"

    def services(self, job: str) -> list[TaskService]:
        if self._services is None:  # a remote OpenPAI
            raise NotSupported("task services need the embedded cluster")
        return [TaskService.model_validate(s) for s in self._services]

    def config(self, job: str) -> str:
        return self._config

    def detail(self, job: str) -> JobDetail:
        tasks = [{"taskIndex": i, "taskState": self.task_state} for i in range(2)]
        return JobDetail.from_api(
            {
                "name": "j",
                "jobStatus": {"username": "ann", "state": self.task_state},
                "taskRoles": {"ps": {"taskStatuses": tasks}, "w": {"taskStatuses": tasks}},
            }
        )


def test_a_jobs_tensorboard_is_embedded_through_the_server_extension_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAI_JUPYTER_BASE_URL", "/user/ann/")
    svc = {"role": "w", "index": 1, "name": "tensorboard", "host": "127.0.0.1", "port": 9, "state": "running"}
    html = tensorboard.for_job(JobClient([svc]), "j").data
    assert 'src="/user/ann/pai/jobs/ann~j/w/1/tensorboard/"' in html
    assert "runs no TensorBoard" in tensorboard.for_job(JobClient([]), "j").data
    assert "was stopped" in tensorboard.for_job(JobClient([{**svc, "state": "stopped"}]), "j").data
    waiting = JobClient([{**svc, "state": "stopped"}], task_state="WAITING")  # not started yet: embed, it comes up
    assert 'src="/user/ann/pai/jobs/ann~j/w/1/tensorboard/"' in tensorboard.for_job(waiting, "j").data
    ended = JobClient([{**svc, "state": "stopped"}], task_state="SUCCEEDED")
    assert "ended with its task (SUCCEEDED)" in tensorboard.for_job(ended, "j").data
    v2 = (
        "protocolVersion: 2\nname: j\ntype: job\nprerequisites: [{name: i, type: dockerimage, uri: busybox}]\n"
        "taskRoles:\n  ps: {instances: 1, dockerImage: i, resourcePerInstance: {cpu: 1, memoryMB: 512, gpu: 0},"
        " commands: [sleep 1]}\nextras:\n  com.microsoft.pai.runtimeplugin: [{plugin: tensorboard}]\n"
    )
    html = tensorboard.for_job(JobClient(None, v2), "j").data  # a remote OpenPAI: the job's plugin says where
    assert 'src="/user/ann/pai/jobs/ann~j/ps/0/tensorboard/"' in html


def test_the_embedded_view_says_where_tensorboard_looks_and_hints_while_it_is_empty(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    svc = {
        "role": "w",
        "index": 1,
        "name": "tensorboard",
        "host": "127.0.0.1",
        "port": 9,
        "state": "starting",
        "logdir": str(logdir),
    }  # port 9: nothing answers yet, the directory is on this machine
    html = tensorboard.for_job(JobClient([svc]), "j").data
    assert f"TensorBoard watches <code>{logdir}</code>" in html and "No event file there yet" in html
    write_scalars(logdir / "train", "loss", [1.0])
    html = tensorboard.for_job(JobClient([svc]), "j").data
    assert "TensorBoard watches" in html and "No event file there yet" not in html
    inside = {**svc, "logdir": "/pai/output/logs/"}  # a container's path: not knowable here, no guess
    html = tensorboard.for_job(JobClient([inside]), "j").data
    assert "TensorBoard watches <code>/pai/output/logs/</code>" in html and "No event file" not in html
