"""Every job has one documented TensorBoard directory, ``$PAI_OUTPUT_LOGS``; the tensorboard
plugin watches it by default, the job's links say where it looks, and the embedded view hints while it is empty."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from pai_jupyter.client import Client
from pai_jupyter.notebook import tensorboard
from pai_jupyter.notebook.joblist import JobList
from tests.helpers.daemon import Api, v1
from tests.polling import wait_for


def _write_scalar(logdir: Path) -> None:
    w = EventFileWriter(str(logdir))
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="loss", simple_value=0.5)])
    w.add_event(event_pb2.Event(wall_time=time.time(), step=1, summary=summary))
    w.close()


def test_a_plain_job_gets_pai_output_logs_under_its_job_dir(daemon: Api) -> None:
    job = Client().submit(v1("plainlogs", 'echo "logs=$PAI_OUTPUT_LOGS"; echo x > "$PAI_OUTPUT_LOGS/marker"'))
    assert daemon.wait(job)["jobStatus"]["state"] == "SUCCEEDED"
    out = daemon.log(job)
    host = daemon.home / "local" / "jobs" / job / "output" / "logs"
    assert f"logs={host}/" in out
    assert (host / "marker").read_text() == "x\n"


def test_tensorboard_watches_pai_output_logs_says_so_and_hints_until_events_appear(daemon: Api) -> None:
    doc = json.loads(v1("tbdefault", "sleep 300"))
    doc["extras"] = {"com.microsoft.pai.runtimeplugin": [{"plugin": "tensorboard"}]}  # no logdir
    pai = Client()
    job = pai.submit(json.dumps(doc))
    try:
        wait_for(lambda: pai.services(job) and pai.services(job)[0].state == "running", 90, "TensorBoard")
        svc = pai.services(job)[0]
        host = daemon.home / "local" / "jobs" / job / "output" / "logs"
        assert svc.logdir == f"{host}/"
        auth = {"Authorization": f"token {svc.token}"}  # the task's TensorBoard wants the proxy's credential
        runs_url = f"http://{svc.host}:{svc.port}/data/runs"
        assert httpx.get(runs_url, timeout=10, headers=auth).json() == []
        shown = tensorboard.for_job(pai, job).data
        assert f"TensorBoard watches <code>{host}/</code>" in shown and "No event file there yet" in shown
        jl = JobList(client=pai, interval=0)
        try:
            assert f"(watches <code>{host}/</code>)" in jl.links(job, "tensorboard")
        finally:
            jl.close()
        _write_scalar(host / "train")
        wait_for(lambda: httpx.get(runs_url, timeout=10, headers=auth).json(), 60, "TensorBoard to find the event file")
        shown = tensorboard.for_job(pai, job).data
        assert "TensorBoard watches" in shown and "No event file there yet" not in shown
    finally:
        daemon.stop(job)
        daemon.wait(job)


def test_a_docker_task_writes_pai_output_logs_into_the_job_dir(docker_daemon: Api) -> None:
    job = Client().submit(v1("dockerlogs", 'echo "logs=$PAI_OUTPUT_LOGS"; echo y > "$PAI_OUTPUT_LOGS/marker"'))
    assert docker_daemon.wait(job, timeout=120)["jobStatus"]["state"] == "SUCCEEDED", docker_daemon.log(job)
    assert "logs=/pai/output/logs/" in docker_daemon.log(job)
    host = docker_daemon.home / "local" / "jobs" / job / "output" / "logs"
    assert (host / "marker").read_text() == "y\n"
