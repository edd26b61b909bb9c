"""pai_jupyter.common: the states and their groups, the home, the route of a task's service and which tasks run a
service plugin, each written once and used by the daemon, the server extension and the notebook alike."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pai_jupyter.cluster import paths
from pai_jupyter.cluster.task import services
from pai_jupyter.common import home, routes
from pai_jupyter.common.states import ACTIVE_TASK, FINAL, JOB_STATES, JobState, TaskState, is_final
from pai_jupyter.notebook import display, tensorboard
from pai_jupyter.protocol import Job
from pai_jupyter.server.common import task_prefix
from tests.helpers.jobdocs import v2_doc, v2_role


def test_states_are_their_wire_strings() -> None:
    assert JobState.FAILED == "FAILED" and JobState("RUNNING") is JobState.RUNNING
    assert f"{JobState.STOPPED}" == str(JobState.STOPPED) == "STOPPED"
    assert "SUCCEEDED" in FINAL and TaskState.FAILED in FINAL and "RUNNING" not in FINAL
    assert {"SUCCEEDED", "FAILED", "STOPPED"} == FINAL and all(type(s) is str for s in FINAL)
    assert {"STARTING", "RUNNING"} == ACTIVE_TASK
    assert JOB_STATES == ("WAITING", "RUNNING", "STOPPING", "SUCCEEDED", "FAILED", "STOPPED")
    assert is_final("STOPPED") and not is_final(None) and not is_final("STOPPING")


def test_every_final_set_is_commons() -> None:
    from pai_jupyter.client import FINAL_STATES
    from pai_jupyter.cluster.core import completion, ending, maxruntime, recovery
    from pai_jupyter.cluster.http import logs as api_logs
    from pai_jupyter.kernel import provisioner
    from pai_jupyter.notebook import monitor

    for module in (completion, recovery, ending, maxruntime, api_logs, provisioner, monitor, tensorboard):
        assert module.FINAL is FINAL, module.__name__
    assert FINAL_STATES is FINAL


def test_home_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PAI_JUPYTER_HOME", str(tmp_path))
    assert home.pai_home() == tmp_path and home.profiles_file() == tmp_path / "clusters.yaml"
    assert home.runtime_file() == tmp_path / "local" / "runtime.json" and home.read_runtime() is None
    home.runtime_file().parent.mkdir()
    home.runtime_file().write_text('{"url": "http://127.0.0.1:1", "token": "t"}')
    assert home.read_runtime() == {"url": "http://127.0.0.1:1", "token": "t"}
    assert paths.runtime_file is home.runtime_file and paths.pai_home is home.pai_home  # one definition


def test_common_imports_none_of_the_layers_above() -> None:
    code = (
        "import sys, pai_jupyter.common.states, pai_jupyter.common.home, pai_jupyter.common.routes; "
        "print(sorted(m for m in sys.modules if m.startswith('pai_jupyter.') and not m.startswith("
        "'pai_jupyter.common')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_one_route_for_a_service() -> None:
    assert routes.service_route("/", "alice", "j1", "main", 0, "jupyter") == "/pai/jobs/alice~j1/main/0/jupyter/"
    assert (
        routes.service_route("/hub/user/a", "a b", "c/d", "r?1", 2, "tensorboard")
        == "/hub/user/a/pai/jobs/a%20b~c%2Fd/r%3F1/2/tensorboard/"
    )
    # the daemon's base path for the in-task Jupyter, the server extension's prefix and the notebook's link agree
    daemon = services.base_path("alice", "j1", "main", 1, "jupyter")
    assert daemon == task_prefix("/", "alice", "j1", "main", 1) + "jupyter/"
    assert daemon == display.service_url("alice~j1", "main", 1, "jupyter", "/")
    assert display.service_url("alice~j1", "main", 1, "jupyter", "/x") == "/x" + daemon  # no slash lost


ROLES = [("main", 1), ("worker", 3)]


@pytest.mark.parametrize(
    ("params", "tasks"),
    [
        (None, [("main", 0)]),
        ({"taskRole": "worker"}, [("worker", 0)]),
        ({"taskRole": "nope"}, [("main", 0)]),
        ({"taskRole": "worker", "allTasks": True}, [("worker", 0), ("worker", 1), ("worker", 2)]),
        ({"taskRole": "worker", "allTasks": "true"}, [("worker", 0)]),  # OpenPAI wants the boolean
    ],
)
def test_which_tasks_run_a_service(params: dict[str, Any] | None, tasks: list[tuple[str, int]]) -> None:
    assert routes.service_tasks(params, ROLES) == tasks
    assert routes.service_tasks(params, []) == []


class _NoServices:
    """A server without the services list (a remote OpenPAI): the notebook works out the tasks from the job."""

    def __init__(self, doc: dict[str, Any]):
        self.doc = doc

    def config(self, job: Any) -> str:
        return yaml.safe_dump(self.doc)


def test_the_notebook_and_the_daemon_pick_the_same_tensorboard_tasks() -> None:
    plugin = {"plugin": "tensorboard", "parameters": {"taskRole": "worker", "allTasks": True}}
    doc = v2_doc({r: v2_role(instances=n) for r, n in ROLES}, extras={"com.microsoft.pai.runtimeplugin": [plugin]})
    daemon = sorted(
        task for task, own in services.planned(Job.from_text(yaml.safe_dump(doc))).items() if "tensorboard" in own
    )
    assert daemon == [("worker", 0), ("worker", 1), ("worker", 2)]
    assert tensorboard.job_targets(_NoServices(doc), "alice~j") == [(r, i, "") for r, i in daemon]
