"""What the MLflow tracking tests share (test_tracking*.py): the task tools' Python (mlflow and pai_jupyter in it, as
in a user's image), a job running a script with it, and whether an MLflow server answers."""

from __future__ import annotations

import os
import shlex
import textwrap
from pathlib import Path

import httpx
import pytest
import yaml

from pai_jupyter.common.home import read_runtime
from tests.helpers.daemon import Api, start_daemon
from tests.polling import wait_for

TASK_TOOLS = os.environ.get("PAI_TEST_TASK_TOOLS", "/opt/pai-task-tools")  # .ci/run: mlflow in it too
PYTHON = f"{TASK_TOOLS}/bin/python3"  # what the users' tasks run (a user's image with mlflow in it)


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health").status_code == 200
    except httpx.HTTPError:
        return False


def job(name: str, script: str, parameters: dict[str, object] | None = None) -> str:
    """A v2 job running ``script`` with the task tools' Python (mlflow and pai_jupyter in it, as in a user's image)."""
    return job_of(name, f"{PYTHON} -c {shlex.quote(textwrap.dedent(script))}", parameters)


def job_of(
    name: str, command: str, parameters: dict[str, object] | None = None, instances: int = 1, cpu: int = 1
) -> str:
    """A v2 job of one role of ``instances`` tasks running ``command``, ``cpu`` CPUs each."""
    doc = {
        "protocolVersion": 2,
        "name": name,
        "type": "job",
        "parameters": parameters or {},
        "prerequisites": [{"type": "dockerimage", "name": "image", "uri": "busybox"}],
        "taskRoles": {
            "main": {
                "instances": instances,
                "dockerImage": "image",
                "resourcePerInstance": {"cpu": cpu, "memoryMB": 1024, "gpu": 0},
                "commands": [command],
            }
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def start_tracked(home: Path, runtime: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Api, str]:
    """A daemon of ``runtime`` on ``home`` that tracks jobs (``--mlflow on``, its server run from the task tools),
    and that server's URL once it answers; skipped where the task tools have no mlflow."""
    if not Path(TASK_TOOLS, "bin", "mlflow").exists():
        pytest.skip(f"no mlflow in the task tools at {TASK_TOOLS} (.ci/run installs it there)")
    monkeypatch.setenv("PAI_JUPYTER_TASK_TOOLS", TASK_TOOLS)
    api = start_daemon(home, runtime=runtime, extra_args=["--mlflow", "on"])
    info = read_runtime(home)
    assert info is not None and info.get("mlflow"), info
    url = str(info["mlflow"])
    wait_for(lambda: answers(url), 180, "the MLflow server answering (its first start)")
    return api, url
