"""JobForm logic without a frontend: fields <-> JSON, validation beside each field, import/export, submit.

Widgets talk to a recording comm (ipywidgets' own test pattern), so the tests also see what a frontend gets.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from ipywidgets.widgets import widget as widget_module

from pai_jupyter.client import InvalidJob, JobConflict, Profile
from pai_jupyter.notebook.form import JobForm
from pai_jupyter.notebook.formfields import PLUGIN_KEY, locate

ROOT = Path(__file__).resolve().parents[2]
EVIL = "<img src=x onerror=alert(1)>"


class RecordingComm:
    """Stands in for the kernel's comm: keeps every message a widget sends."""

    kernel = "a kernel"
    sent: list[dict[str, Any]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.comm_id = kwargs.get("comm_id") or f"c{len(RecordingComm.sent)}"

    def open(self, *args: Any, **kwargs: Any) -> None: ...

    def on_msg(self, *args: Any, **kwargs: Any) -> None: ...

    def close(self, *args: Any, **kwargs: Any) -> None: ...

    def send(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        RecordingComm.sent.append(data)


@pytest.fixture(autouse=True)
def comm(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    monkeypatch.setattr(widget_module.comm, "create_comm", lambda **kw: RecordingComm(**kw))
    RecordingComm.sent = []
    yield RecordingComm.sent


def doc(form: JobForm) -> dict[str, Any]:
    return json.loads(form.to_json())


def test_defaults_are_seed_001s_basic_form() -> None:
    form = JobForm()
    d = doc(form)
    assert d["taskRoles"] == [
        {
            "name": "main",
            "taskNumber": 1,
            "cpuNumber": 1,
            "memoryMB": 1024,
            "shmMB": 64,
            "gpuNumber": 0,
            "command": "sleep infinity",
        }  # the completion policy at its defaults is left out, as the Lab's form does
    ]
    assert form.problems == [] and form.pro.value is False
    assert form.pro_box.layout.display == "none" and form.roles[0].instances.box.layout.display == "none"
    assert form.roles[0].memory.box.layout.display == ""  # memory is a basic setting
    form.pro.value = True
    assert form.pro_box.layout.display == "" and form.roles[0].instances.box.layout.display == ""


def test_fields_write_the_json_and_the_json_writes_the_fields() -> None:
    form = JobForm()
    form.edit_json.value = True
    form.name.value = "exp1"
    form.roles[0].ports.value = "http:1, ssh:2"
    form.env.value = "LR=0.1\nMODE=fast"
    form.storages.value = "team:/mnt/team"
    form.switches["tensorboard"].value, form.params["tb_logdir"].value = True, "/out/tb"
    form.switches["jupyter"].value = True
    d = json.loads(form.json.value)
    assert d["jobName"] == "exp1" and d["jobEnvs"] == {"LR": "0.1", "MODE": "fast"}
    assert d["taskRoles"][0]["portList"] == [
        {"label": "http", "beginAt": 0, "portNumber": 1},
        {"label": "ssh", "beginAt": 0, "portNumber": 2},
    ]
    assert d["extras"] == {
        "storages": [{"name": "team", "mountPath": "/mnt/team"}],
        PLUGIN_KEY: [{"plugin": "tensorboard", "parameters": {"logdir": "/out/tb"}}, {"plugin": "jupyter"}],
    }
    d["taskRoles"][0]["cpuNumber"] = 4
    d["taskRoles"].append({**d["taskRoles"][0], "name": "worker", "taskNumber": 3})
    d["extras"][PLUGIN_KEY] = [{"plugin": "ssh"}]
    d["dataDir"] = "/data"  # no field for it: kept as written
    form.json.value = json.dumps(d)
    assert form.roles[0].cpu.value == 4 and [r.name.value for r in form.roles] == ["main", "worker"]
    assert form.roles[1].instances.value == 3 and len(form.tabs.children) == 2 and form.tabs.titles[1] == "worker"
    assert [form.switches[k].value for k in ("ssh", "tensorboard", "jupyter")] == [True, False, False]
    assert doc(form)["dataDir"] == "/data" and form.problems == []


def test_each_problem_shows_beside_its_field() -> None:
    form = JobForm()
    form.roles[0].memory.value = 50
    assert "50 is below the minimum 100" in form.roles[0].memory.error.value
    assert "more than memoryMB 50" in form.roles[0].shm.error.value
    form.roles[0].memory.value = 2048
    assert form.roles[0].memory.error.value == "" and form.problems == []
    form.name.value = EVIL
    assert "job names may use only" in form.name.error.value and "<img" not in form.name.error.value
    form.name.value = "ok"
    form.roles[0].cpu.value = 0
    form.roles[0].ports.value = "http:x, bare"
    form.env.value = "NOEQUALS"
    form.image.value = ""
    assert "below the minimum 1" in form.roles[0].cpu.error.value
    assert "'x' is not a port count" in unescape(form.roles[0].ports.error.value)
    assert "'bare' is not label:count" in unescape(form.roles[0].ports.error.value)
    assert "'NOEQUALS' is not KEY=value" in unescape(form.env.error.value)
    assert form.image.error.value != "" and form.general.value == ""
    form.add_role("main")  # a second role with the same name
    assert "used by another task role" in form.roles[1].name.error.value


def test_problem_paths_of_every_spelling_find_their_field() -> None:
    assert locate("taskRoles[0].memoryMB") == (0, "memory")
    assert locate("task_roles[2].memory_mb") == (2, "memory")
    assert locate("task_roles[1].commands") == (1, "command")
    assert locate("taskRoles[0].portList[1].label") == (0, "ports")
    assert locate("taskRoles[3]") == (3, "name")
    assert locate("jobName") == (None, "name") and locate("name") == (None, "name")
    assert locate("retry_count") == (None, "retry") and locate("parameters.x") == (None, "env")
    assert locate("extras.storages[0]") == (None, "storages")
    assert locate(f"extras.{PLUGIN_KEY}[0].plugin") == (None, "plugins")
    assert locate("deployments[0].name") == (None, None) and locate("") == (None, None)


def test_general_problems_go_above_the_buttons_escaped() -> None:
    form = JobForm()
    form.show_problems([("deployments[0]", EVIL)])
    assert "<img" not in form.general.value and "&lt;img" in form.general.value


def test_import_fills_the_form_from_a_v1_file_and_a_v2_file(comm: list[dict[str, Any]]) -> None:
    form = JobForm()
    v1 = (ROOT / "notebooks/jobs/tensorflow-cifar10.json").read_bytes()
    form.upload.set_state(
        {
            "value": [
                {
                    "name": "cifar.json",
                    "type": "application/json",
                    "size": len(v1),
                    "content": memoryview(v1),
                    "last_modified": 0,
                }
            ]
        }
    )
    source = json.loads(v1)
    assert form.name.value == source["jobName"] and form.image.value == source["image"]
    assert form.roles[0].command.value == source["taskRoles"][0]["command"]
    form.load((ROOT / "notebooks/jobs/quickstart.yaml").read_text())  # v2 -> the form's v1 (description dropped)
    assert [r.name.value for r in form.roles] == ["worker"] and form.roles[0].instances.value == 2
    assert form.pro.value is True and form.env.value == "greeting=hello from pai_jupyter" and form.problems == []
    # the frontend was told: some message carried the new job name
    assert any((m or {}).get("state", {}).get("value") == "quickstart" for m in comm)


def test_a_document_that_cannot_be_read_leaves_the_fields_and_says_why() -> None:
    form = JobForm()
    form.edit_json.value = True
    form.json.value = "{not json"
    assert form.name.value == "my-job" and "cannot load" in form.json_error.value
    form.json.value = json.dumps(
        {
            "jobName": "x",
            "image": "i",
            "taskRoles": [
                {"name": "r", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 10, "gpuNumber": 0, "command": "true"}
            ],
        }
    )
    assert form.json_error.value == "" and form.name.value == "x"
    assert "10 is below the minimum 100" in form.roles[0].memory.error.value


def test_export_gives_a_download_link_of_the_json() -> None:
    form = JobForm()
    form.name.value = "exp"
    data = form.export()
    assert 'download="exp.json"' in form.export_link.value
    payload = form.export_link.value.split("base64,")[1].split('"')[0]
    assert base64.b64decode(payload).decode() == data and json.loads(data)["jobName"] == "exp"


class Submitter:
    """What the form asks of its client: its profile (a real OpenPAI's: no notes on container paths) and submit."""

    profile = Profile(name="openpai", url="https://pai.example")

    def __init__(self, error: Exception | None = None):
        self.error, self.sent = error, []

    def submit(self, text: str, origin: dict[str, object] | None = None) -> str:
        if self.error:
            raise self.error
        assert origin is not None and origin["via"] == "form"
        self.sent.append(text)
        return "me~" + json.loads(text)["jobName"]


def test_submit_confirms_then_sends_and_shows_the_id() -> None:
    client = Submitter()
    form = JobForm(client_factory=lambda profile: client)
    form.roles[0].memory.value = 10
    assert form.submit() is False and "fix the" in form.result.value and form.confirm_box.layout.display == "none"
    form.roles[0].memory.value = 512
    form.name.value = "run1"
    assert form.submit() is True and form.confirm_box.layout.display == ""
    assert "run1: 1 role, 1 task" in form.confirm_summary.value and client.sent == []
    form.cancel_button.click()
    assert form.confirm_box.layout.display == "none" and client.sent == []
    form.submit()
    form.confirm_button.click()
    assert form.job_id == "me~run1" and "<code>me~run1</code>" in form.result.value
    assert json.loads(client.sent[0])["taskRoles"][0]["memoryMB"] == 512


def test_the_servers_problems_land_beside_the_fields_too() -> None:
    refused = InvalidJob(
        "bad",
        status=400,
        code="InvalidProtocolError",
        body={"problems": [{"path": "taskRoles[0].gpuNumber", "message": "no GPU <here>"}]},
    )
    form = JobForm(client_factory=lambda profile: Submitter(refused))
    form.submit()
    assert form.confirm() is None
    assert "no GPU &lt;here&gt;" in form.roles[0].gpu.error.value and "not submitted" in form.result.value


def test_refusals_without_a_path_land_beside_their_field() -> None:
    """An unknown virtual cluster is the "Virtual cluster" field's, a name taken the "Job name" field's (the
    daemon says either without a path); what does not fit stays above the buttons."""
    no_vc = InvalidJob(
        "job x can never run here: virtual cluster 'nope' does not exist (known: default)",
        status=400,
        code="InsufficientResourceError",
    )
    form = JobForm(client_factory=lambda profile: Submitter(no_vc))
    form.submit()
    assert form.confirm() is None
    assert "virtual cluster &#x27;nope&#x27; does not exist" in form.vc.error.value and form.general.value == ""
    taken = JobConflict("job me~x already exists; choose another name", status=409, code="ConflictJobError")
    form = JobForm(client_factory=lambda profile: Submitter(taken))
    form.submit()
    assert form.confirm() is None and "already exists" in form.name.error.value


def test_import_redraws_the_role_tab_and_the_button_keeps_its_count(comm: list[dict[str, Any]]) -> None:
    form = JobForm()
    first = form.roles[0].box
    v1 = (ROOT / "notebooks/jobs/tensorflow-cifar10.json").read_bytes()
    comm.clear()
    form.upload.set_state(
        {
            "value": [
                {
                    "name": "cifar.json",
                    "type": "application/json",
                    "size": len(v1),
                    "content": memoryview(v1),
                    "last_modified": 0,
                }
            ]
        }
    )
    # the role's tab keeps its child (filled again): the frontend has nothing to redraw, so nothing stays blank
    assert form.tabs.children == (first,) and form.roles[0].box is first
    assert not any("children" in (m or {}).get("state", {}) for m in comm)
    # the frontend's upload value was never reset to [] (it would read "Import (0)" after a good import)
    assert not any("value" in (m or {}).get("state", {}) and m["state"]["value"] == [] for m in comm)
    assert form.upload.value == () and "imported <code>cifar.json</code>" in form.imported.value
    form.upload.set_state(
        {
            "value": [
                {
                    "name": "cifar.json",
                    "type": "application/json",
                    "size": len(v1),
                    "content": memoryview(v1),
                    "last_modified": 0,
                }
            ]
        }
    )
    assert form.name.value == json.loads(v1)["jobName"]  # the same file again is imported again


def test_bad_json_is_reported_as_a_json_error() -> None:
    form = JobForm()
    form.edit_json.value = True
    form.json.value = '{"jobName": "x",\n  "image": }'
    error = unescape(form.json_error.value)
    assert "not valid JSON: Expecting value at line 2, column 12" in error and "YAML" not in error


def test_work_duration_is_max_run_time_minutes() -> None:
    form = JobForm()
    assert form.max_run.value == 0 and "maxRunTimeMinutes" not in doc(form).get("extras", {})
    form.max_run.value = 90
    assert doc(form)["extras"]["maxRunTimeMinutes"] == 90
    form.load(json.dumps({**doc(form), "extras": {"maxRunTimeMinutes": 2.5}}))
    assert form.max_run.value == 2.5 and form.problems == []
    assert locate("extras.maxRunTimeMinutes") == (None, "max_run")


def test_buttons_are_as_wide_as_their_labels() -> None:
    form = JobForm()
    for button in (form.confirm_button, form.submit_button, form.upload, form.add_role_button):
        assert button.layout.width == "auto"


def _refs(value: Any) -> set[str]:
    """The model ids a widget's state refers to ("IPY_MODEL_<id>")."""
    if isinstance(value, str):
        return {value.removeprefix("IPY_MODEL_")} if value.startswith("IPY_MODEL_") else set()
    if isinstance(value, (list, tuple)):
        return set().union(*map(_refs, value)) if value else set()
    if isinstance(value, dict):
        return set().union(*map(_refs, value.values())) if value else set()
    return set()


def test_a_form_made_later_needs_no_model_made_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page opened after the first form (a browser reload) only gets the models made from then on: the new
    form must refer to none made earlier, or the page says "model not found" for each."""
    opened: set[str] = set()

    def create_comm(**kw: Any) -> RecordingComm:
        c = RecordingComm(**kw)
        c.comm_id = kw.get("comm_id") or f"m{len(opened)}-{id(c)}"
        opened.add(c.comm_id)
        return c

    monkeypatch.setattr(widget_module.comm, "create_comm", create_comm)
    JobForm()  # the first page's form
    opened.clear()  # the new page knows nothing made before
    form = JobForm()
    seen, todo = set(), {form.model_id}
    while todo:
        model_id = todo.pop()
        seen.add(model_id)
        todo |= _refs(widget_module._instances[model_id].get_state()) - seen
    try:
        assert seen - opened == set()
    finally:
        widget_module.Widget.close_all()  # the models this test kept apart, gone before the interpreter is


def test_the_notebook_form_draws_the_shared_form_definition() -> None:
    """The notebook's and the Lab's forms are one definition: the same fields, labels and order, and the same
    basic/pro split."""
    from pai_jupyter.protocol.formspec import JOB_FIELDS, ROLE_FIELDS, definition, plugin_fields

    form = JobForm()
    boxes = {f.box: name for name, f in form.job_fields.items()}
    shown = [boxes[c] for c in form.children if c in boxes]  # the basic settings, in the form's order
    assert shown == [f.key for f in JOB_FIELDS if not f.pro] + ["plugins"]
    assert [form.job_fields[f.key].widget.description for f in JOB_FIELDS] == [f.label for f in JOB_FIELDS]
    assert [f.widget.description for f in form.roles[0].fields.values()] == [f.label for f in ROLE_FIELDS]
    assert [c.description for c in form.switches.values()] == [f.label for f in plugin_fields() if f.kind == "switch"]
    assert [w.description for w in (b.children[0] for b in form.pro_box.children[:-1])] == [
        f.label for f in JOB_FIELDS if f.pro
    ]
    assert tuple(f["key"] for f in definition()["role"] if not f["pro"]) == form.roles[0].BASIC
    assert form.roles[0].instances.box.layout.display == "none"  # a pro field, hidden in basic mode


def test_plugin_switches_keep_the_plugins_they_do_not_know() -> None:
    form = JobForm()
    assert form.pro.value is False and form.plugins.box.layout.display != "none"  # basic mode has them
    form.load(json.dumps({**doc(form), "extras": {PLUGIN_KEY: [{"plugin": "git", "parameters": {"x": 1}}]}}))
    form.switches["desktop"].value = True
    form.switches["ssh"].value = True
    assert doc(form)["extras"][PLUGIN_KEY] == [
        {"plugin": "git", "parameters": {"x": 1}},
        {"plugin": "ssh"},
        {"plugin": "desktop"},
    ]
    assert form.pro.value is False


def test_a_roles_keys_without_a_field_are_kept() -> None:
    form = JobForm()
    d = doc(form)
    d["taskRoles"][0]["extraContainerOptions"] = {"infiniband": True}
    form.load(json.dumps(d))
    form.roles[0].cpu.value = 2
    assert doc(form)["taskRoles"][0]["extraContainerOptions"] == {"infiniband": True}


def test_the_virtual_cluster_is_a_choice_of_the_clusters_answer_or_a_text_box_that_says_why() -> None:
    """The definition's virtual cluster field: a select of the user's virtual clusters with ``default`` picked
    (the first one where the user may not use ``default``); no list: the text box with a note saying why."""
    from pai_jupyter.protocol.formspec import definition, vc_field

    vc = next(f for f in definition(["research", "default", "research"])["job"] if f["key"] == "vc")
    assert (vc["kind"], vc["options"], vc["default"], vc["note"]) == ("choice", ["research", "default"], "default", "")
    assert vc_field(["research", "gpu"]).default == "research"
    for vcs, why in ((None, "nothing answered at http://127.0.0.1:1"), ([], "")):
        fallback = vc_field(vcs, why)
        assert fallback.kind == "text" and fallback.default == "default" and "type the name" in fallback.note
        assert (why or "names no virtual cluster") in fallback.note


def test_the_notebook_forms_virtual_cluster_keeps_what_was_typed_or_loaded() -> None:
    """A value typed before the list came, or loaded from a document, stays picked even where the cluster does
    not list it (the cluster's refusal then says why); an untouched ``default`` becomes the list's pick."""
    from pai_jupyter.protocol.formspec import vc_field

    form = JobForm()
    assert form.vc.widget is form.vc.text  # not shown yet: nothing asked
    form.vc.value = "typed"
    form.vc.offer(vc_field(["default", "research"]))
    assert form.vc.widget is form.vc.select and form.vc.select.options == ("default", "research", "typed")
    assert doc(form)["virtualCluster"] == "typed"
    form.vc.value = "research"
    assert doc(form)["virtualCluster"] == "research"
    form.load(json.dumps({**doc(form), "virtualCluster": "loaded"}))
    assert form.vc.value == "loaded" and "loaded" in form.vc.select.options
    fresh = JobForm()
    fresh.vc.offer(vc_field(["gpu", "research"]))
    assert fresh.vc.value == "gpu" and doc(fresh)["virtualCluster"] == "gpu"
    assert fresh.vc.text.layout.display == "none" and fresh.vc.select.layout.display == ""


def test_the_plugin_switches_say_which_tasks_run_them() -> None:
    """The switches' help (both forms draw it) says what the daemon does: a service in the first role's task 0,
    SSH in every task; the form did not say so."""
    from pai_jupyter.cluster.task.services import planned
    from pai_jupyter.protocol import Job
    from pai_jupyter.protocol.formspec import plugin_fields

    role = {
        "instances": 2,
        "dockerImage": "img",
        "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 0},
        "commands": ["true"],
    }
    switches = [f for f in plugin_fields() if f.kind == "switch"]
    job = Job.from_text(
        json.dumps(
            {
                "protocolVersion": 2,
                "name": "plugins",
                "type": "job",
                "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "busybox"}],
                "taskRoles": {"first": role, "second": role},
                "extras": {PLUGIN_KEY: [{"plugin": f.key} for f in switches]},
            }
        )
    )
    where = planned(job)
    form = JobForm()
    for f in switches:
        tasks = sorted(t for t, services in where.items() if f.key in services)
        if f.help == "runs in every task of every task role":
            assert tasks == [("first", 0), ("first", 1), ("second", 0), ("second", 1)], f.key
        else:
            assert f.help.startswith("runs in the first task role's task 0") and tasks == [("first", 0)], f.key
        assert f.help in form.switches[f.key].tooltip
