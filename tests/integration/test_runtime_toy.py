"""A runtime from outside the package (tests/toyruntime: a toy batch system, registered only through the entry point
group ``pai_jupyter.runtimes``) runs jobs on a real daemon with no core change: the daemon hands it whole jobs
(``launches.Handed``), the job waits in the toy scheduler's words until it places them, each task's node and IP
are the ones it reports, its tasks' ports follow its own rule, and logs, the PAI_* environment, stop and the
job's end behave as on any runtime."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from tests.helpers.daemon import Api, kill_leftovers, start_daemon
from tests.toyruntime import NODE, PORTS_FROM, register

ROOT = Path(__file__).parents[2]


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    site = register(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    home = tmp_path / "home"
    api = start_daemon(home, runtime="toy")
    try:
        yield api
    finally:
        control.stop(home)
        kill_leftovers(home)


def _job(name: str, command: str, instances: int = 1) -> str:
    role = {"instances": instances, "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0, "ports": {"http": 1}}}
    return json.dumps(
        {
            "protocolVersion": 2,
            "name": name,
            "type": "job",
            "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "pai-test/busybox:latest"}],
            "taskRoles": {"main": {"dockerImage": "img", **role, "commands": [command]}},
        }
    )


def test_a_plugged_in_batch_runtime_runs_a_two_task_job_where_its_scheduler_places_it(toy: Api) -> None:
    command = 'echo "task $PAI_TASK_INDEX of $PAI_TASK_ROLE_TASK_COUNT_main at $PAI_HOST_IP_main_0"'
    command += ' "port $PAI_CONTAINER_HOST_http_PORT_LIST"'
    job = toy.submit_ok(_job("two", command, 2))
    detail = toy.wait(job, timeout=60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", toy.tasks(detail)
    tasks = toy.tasks(detail)
    assert [t["taskState"] for t in tasks] == ["SUCCEEDED", "SUCCEEDED"]
    assert {t["containerNodeName"] for t in tasks} == {NODE}  # where the toy scheduler said it placed them
    for index in (0, 1):
        said = toy.log(job, index=index, name="stdout")
        assert f"task {index} of 2 at 127.0.0.1 port " in said, said
        assert PORTS_FROM <= int(said.split(" port ")[1]) < PORTS_FROM + 1000  # its own rule (ToyPorts), not ephemeral
    events = [(e["reason"], e["message"]) for e in toy.http.get(f"/api/v2/jobs/{job}/events").json()["data"]]
    assert [r for r, _ in events].count("TaskSubmitted") == 2  # handed over whole, not started by the daemon
    assert any(r == "TaskStarted" and f"on node {NODE}" in m for r, m in events), events


def test_a_job_stopped_on_the_plugged_in_runtime_ends_stopped(toy: Api) -> None:
    job = toy.submit_ok(_job("long", "echo started; sleep 300"))
    toy.wait(job, states={"RUNNING"}, timeout=60)
    assert toy.stop(job).status_code == 202
    assert toy.wait(job, timeout=60)["jobStatus"]["state"] == "STOPPED"
