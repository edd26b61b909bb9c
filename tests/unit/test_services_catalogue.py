"""The one catalogue of in-task services (common/services.py): every layer derives its list from it, so a new
service is one entry plus its start command. A made-up service added to the catalogue (in a fresh interpreter,
before the layers are imported, as an entry in the file would be) is found by the job rules, the daemon's plan
and start commands, the Jupyter server's routes, titles and answers, and the notebook's actions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from pai_jupyter.cluster.task import services as task_services
from pai_jupyter.common import services
from pai_jupyter.common.services import CATALOGUE, links

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, re
from pai_jupyter.common import services as catalogue
catalogue.CATALOGUE = (*catalogue.CATALOGUE, catalogue.Service("board", "Board", web="http", starts="tools"))

from pai_jupyter.protocol import job_from_document
from pai_jupyter.protocol.rules import RUNTIME_PLUGINS
from pai_jupyter.cluster.task import services as task
from pai_jupyter.server.common import SERVICES
from pai_jupyter.server.proxy import SERVICE_RE
from pai_jupyter.server.sandboxed import SANDBOXED_RE
from pai_jupyter.server.registry import TITLES
from pai_jupyter.server.lab_api import detail_json
from pai_jupyter.client.models import JobDetail, TaskService
from pai_jupyter.notebook import joblist

task.START["board"] = lambda info: f"exec board --port {info['port']}"
doc = {"protocolVersion": 2, "name": "b", "type": "job", "prerequisites": [{"type": "dockerimage", "name": "img",
       "uri": "busybox"}], "taskRoles": {"main": {"instances": 2, "dockerImage": "img", "commands": ["sleep 1"],
       "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0}}},
       "extras": {"com.microsoft.pai.runtimeplugin": [{"plugin": "board", "parameters": {"allTasks": True}}]}}
job = job_from_document(doc)
plan = task.planned(job)
info = {"port": 4242, "parameters": {}, "token": "t", "basePath": "/"}
detail = JobDetail.from_api({"name": "b", "jobStatus": {"username": "alice", "state": "RUNNING"},
    "taskRoles": {"main": {"taskStatuses": [{"taskIndex": 0, "taskState": "RUNNING"}]}}})
answer = detail_json("/base/", detail, [TaskService(role="main", index=0, name="board", port=1, state="running")])
print(json.dumps({
    "plugin": "board" in RUNTIME_PLUGINS,
    "plan": {f"{r}/{i}": sorted(s) for (r, i), s in plan.items()},
    "start": task.start_command("board", info),
    "supervisor": "board:start)" in task.supervisor({"board": info}),
    "served": "board" in SERVICES,
    "route": (m := re.fullmatch(SERVICE_RE, "alice~b/main/0/board/x")) is not None and m["service"],
    "sandboxed": re.fullmatch(SANDBOXED_RE, "alice~b/main/0/board/~1a." + "b" * 32 + "/x") is not None,
    "title": TITLES.get("board"),
    "answer": answer["tasks"][0]["services"],
    "actions": "Board" in joblist.ACTIONS and joblist.SERVICE.get("Board"),
}))
"""


def probe() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_new_catalogue_entry_reaches_every_layer() -> None:
    seen = probe()
    assert seen["plugin"] is True  # the job rules accept its plugin
    assert seen["plan"] == {"main/0": ["board"], "main/1": ["board"]}  # the daemon plans it (allTasks)
    assert "exec board --port 4242" in seen["start"] and "PAI_SERVICE_BIN" in seen["start"]  # on the tools
    assert seen["supervisor"] is True  # and starts or stops it on request
    assert seen["served"] is True and seen["route"] == "board" and seen["sandboxed"] is True  # proxied
    assert seen["title"] == "Board"
    assert seen["answer"] == [
        {"name": "board", "title": "Board", "url": "/base/pai/jobs/alice~b/main/0/board/", "icon": ""}
    ]
    assert seen["actions"] == "board"  # the notebook's job list links to it


def test_every_service_has_a_start_command_and_unique_name() -> None:
    assert set(task_services.START) == {s.name for s in CATALOGUE}
    assert len({s.name for s in CATALOGUE}) == len(CATALOGUE)


def test_the_servers_answer_lists_only_the_tasks_services() -> None:
    """The Lab draws a task's buttons from this: a task without Jupyter gets no Jupyter link; ssh has no page."""
    got = links("/", "alice", "j", "main", 0, ["tensorboard", "ssh", "unknown"])
    assert got == [
        {
            "name": "tensorboard",
            "title": "TensorBoard",
            "url": "/pai/jobs/alice~j/main/0/tensorboard/",
            "icon": services.TENSORBOARD_ICON,
        },
        {"name": "ssh", "title": "SSH", "url": None, "icon": ""},
    ]
    assert services.by_name("jupyter") is not None and links("/", "a", "j", "r", 1, ["jupyter"])[0]["url"] == (
        "/pai/jobs/a~j/r/1/jupyter/lab"
    )
