"""Each validation rule is written once, on the model, with one message: a v2 YAML document, a v1 JSON document,
a Python builder and the notebook form that break the same rule are told the same thing, each at its own path.

A rule given a second copy with its own wording (in a reader, or in the form) makes these tests fail."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from html import unescape
from typing import Any

import pytest
import yaml
from ipywidgets.widgets import widget as widget_module

from pai_jupyter.notebook.form import JobForm
from pai_jupyter.protocol import ConversionError, Job, JobValidationError, TaskRole
from tests.helpers.jobdocs import v1_doc, v1_role, v2_doc, v2_role

Edit = Callable[[dict[str, Any]], None]


def _v2_res(**over: Any) -> Edit:
    return lambda doc: doc["taskRoles"]["worker"]["resourcePerInstance"].update(over)


def _v2_role(**over: Any) -> Edit:
    return lambda doc: doc["taskRoles"]["worker"].update(over)


def _v1_role(**over: Any) -> Edit:
    return lambda doc: doc["taskRoles"][0].update(over)


PLUGINS = {"com.microsoft.pai.runtimeplugin": [{"plugin": "nope"}]}
PLUGIN_MESSAGE = (
    "'nope' is not a known runtime plugin (one of tensorboard, jupyter, ssh, desktop, cmd, git, teamwise_storage)"
)

# rule: (v2 edit, v2 path), (v1 edit, v1 path), (builder job kwargs, model path), form field, the one message
CASES: dict[str, tuple[tuple[Edit, str], tuple[Edit, str], tuple[dict[str, Any], str], str | None, str]] = {
    "shared memory within memory": (
        (
            lambda doc: (_v2_res(memoryMB=200)(doc), _v2_role(extraContainerOptions={"shmMB": 300})(doc)),
            "taskRoles.worker.extraContainerOptions.shmMB",
        ),
        (_v1_role(shmMB=300, memoryMB=200), "taskRoles[0].shmMB"),
        ({"task_roles": [{"name": "w", "command": "x", "shm_mb": 300, "memory_mb": 200}]}, "task_roles[0].shm_mb"),
        "shm",
        "300 is more than memoryMB 200",
    ),
    "failed count within the role's tasks": (
        (_v2_role(instances=2, completion={"minFailedInstances": 3}), "taskRoles.worker.completion.minFailedInstances"),
        (_v1_role(taskNumber=2, minFailedTaskCount=3), "taskRoles[0].minFailedTaskCount"),
        ({"task_roles": [{"name": "w", "command": "x", "instances": 2, "min_failed": 3}]}, "task_roles[0].min_failed"),
        "min_failed",
        "3 is more than the role's 2 tasks",
    ),
    "succeeded count within the role's tasks": (
        (_v2_role(completion={"minSucceededInstances": 2}), "taskRoles.worker.completion.minSucceededInstances"),
        (_v1_role(minSucceededTaskCount=2), "taskRoles[0].minSucceededTaskCount"),
        ({"task_roles": [{"name": "w", "command": "x", "min_succeeded": 2}]}, "task_roles[0].min_succeeded"),
        "min_succeeded",
        "2 is more than the role's 1 task",
    ),
    "a non-blank command": (
        (_v2_role(commands=[" ", ""]), "taskRoles.worker.commands"),
        (_v1_role(command="  "), "taskRoles[0].command"),
        ({"task_roles": [{"name": "w", "commands": ["  "]}]}, "task_roles[0].commands"),
        "command",
        "must hold at least one non-blank command",
    ),
    "memory minimum": (
        (_v2_res(memoryMB=99), "taskRoles.worker.resourcePerInstance.memoryMB"),
        (_v1_role(memoryMB=99, shmMB=0), "taskRoles[0].memoryMB"),
        ({"task_roles": [{"name": "w", "command": "x", "memory_mb": 99, "shm_mb": 0}]}, "task_roles[0].memory_mb"),
        "memory",
        "99 is below the minimum 100",
    ),
    "cpu minimum": (
        (_v2_res(cpu=0), "taskRoles.worker.resourcePerInstance.cpu"),
        (_v1_role(cpuNumber=0), "taskRoles[0].cpuNumber"),
        ({"task_roles": [{"name": "w", "command": "x", "cpu": 0}]}, "task_roles[0].cpu"),
        "cpu",
        "0 is below the minimum 1",
    ),
    "an image to run": (
        (lambda doc: doc["prerequisites"][0].update(uri=" "), "prerequisites[0].uri"),
        (lambda doc: doc.update(image=" "), "image"),
        ({"image": " ", "task_roles": [{"name": "w", "command": "x"}]}, "prerequisites[0].uri"),
        "image",
        "is required: the image to run, e.g. python:3.11",
    ),
    "known runtime plugins": (
        (lambda doc: doc.update(extras=PLUGINS), "extras.com.microsoft.pai.runtimeplugin[0].plugin"),
        (lambda doc: doc.update(extras=PLUGINS), "extras.com.microsoft.pai.runtimeplugin[0].plugin"),
        ({"extras": PLUGINS}, "extras.com.microsoft.pai.runtimeplugin[0].plugin"),
        "plugins",
        PLUGIN_MESSAGE,
    ),
    "a run-time limit above 0": (
        (lambda doc: doc.update(extras={"maxRunTimeMinutes": 0}), "extras.maxRunTimeMinutes"),
        (lambda doc: doc.update(extras={"maxRunTimeMinutes": 0}), "extras.maxRunTimeMinutes"),
        ({"extras": {"maxRunTimeMinutes": 0}}, "extras.maxRunTimeMinutes"),
        "max_run",
        "0 must be a number of minutes above 0 and at most 527040 (a year)",
    ),
    "a run-time limit of at most a year": (
        (lambda doc: doc.update(extras={"maxRunTimeMinutes": 10**9}), "extras.maxRunTimeMinutes"),
        (lambda doc: doc.update(extras={"maxRunTimeMinutes": 10**9}), "extras.maxRunTimeMinutes"),
        ({"extras": {"maxRunTimeMinutes": 10**9}}, "extras.maxRunTimeMinutes"),
        "max_run",
        "1000000000 must be a number of minutes above 0 and at most 527040 (a year)",
    ),
}


def _only_problem(make: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(JobValidationError) as info:
        make()
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0].path, info.value.problems[0].message


@pytest.mark.parametrize("case", CASES)
def test_v2_yaml_v1_json_and_the_builder_say_the_same(case: str) -> None:
    (v2_edit, v2_path), (v1_edit, v1_path), (kwargs, model_path), _field, message = CASES[case]
    v2, v1 = v2_doc(), v1_doc()
    v2_edit(v2)
    v1_edit(v1)
    build = {"name": "j", "image": "python:3.11", "task_roles": [TaskRole(name="w", command="x")], **kwargs}
    found = {
        "v2 yaml": _only_problem(lambda: Job.from_text(yaml.safe_dump(v2))),
        "v1 json": _only_problem(lambda: Job.from_text(json.dumps(v1))),
        "builder": _only_problem(lambda: Job(**copy.deepcopy(build))),
    }
    assert found == {"v2 yaml": (v2_path, message), "v1 json": (v1_path, message), "builder": (model_path, message)}


@pytest.fixture
def form() -> Iterator[JobForm]:
    class Comm:  # stands in for the kernel's comm (see test_notebook_form.py)
        kernel = "a kernel"
        comm_id = "c"

        def __getattr__(self, name: str) -> Callable[..., None]:
            return lambda *args, **kwargs: None

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(widget_module.comm, "create_comm", lambda **kw: Comm())
        yield JobForm()


@pytest.mark.parametrize("case", CASES)
def test_the_form_shows_the_same_message_beside_its_field(case: str, form: JobForm) -> None:
    _v2, (v1_edit, v1_path), _builder, field, message = CASES[case]
    doc = v1_doc()
    v1_edit(doc)
    assert form.validate(doc) == [(v1_path, message)]
    widget = form.job_fields.get(field) or form.roles[0].fields[field]
    assert unescape(widget.error.value).count(message) == 1
    assert form.general.value == ""


def test_a_rule_only_one_format_can_break_has_the_model_s_message() -> None:
    """v1 role names and port labels can repeat (v2's are mapping keys); v2 prerequisites can be missing."""
    role = v1_role(portList=[{"label": "a", "beginAt": 0, "portNumber": 1}] * 2)
    with pytest.raises(JobValidationError) as v1:
        Job.from_dict(v1_doc(role, v1_role()))
    with pytest.raises(JobValidationError) as model:
        Job(name="j", image="i", task_roles=[TaskRole(name="main", command="x"), TaskRole(name="main", command="y")])
    assert [str(p) for p in v1.value.problems] == [
        "taskRoles[0].portList[1].label: 'a' is used twice in this role",
        "taskRoles[1].name: 'main' is used by another task role; role names are unique",
    ]
    assert [str(p) for p in model.value.problems] == [
        "task_roles[1].name: 'main' is used by another task role; role names are unique"
    ]
    with pytest.raises(JobValidationError) as v2:
        Job.from_dict(v2_doc({"worker": v2_role(dockerImage="nope", data="d")}))
    with pytest.raises(JobValidationError) as model:
        Job(name="j", image="i", task_roles=[TaskRole(name="w", command="x", docker_image="nope", data="d")])
    assert (
        [p.message for p in v2.value.problems]
        == [p.message for p in model.value.problems]
        == ["'nope' does not name a dockerimage prerequisite", "'d' does not name a data prerequisite"]
    )


def test_v1_s_own_rules_say_the_same_when_read_and_when_written() -> None:
    """jobEnvs and extras keys: refused in a v1 document, and in a job that is to be written as v1."""
    envs = {"isDebug": "yes", "a-b": 1, "x": [1]}
    with pytest.raises(JobValidationError) as read:
        Job.from_dict(v1_doc(jobEnvs=envs, extras={"a b": 1}))
    with pytest.raises(ConversionError) as written:
        Job.from_dict(v2_doc(parameters=envs, extras={"a b": 1})).to_v1()
    expected = [
        "{}.isDebug: v1's isDebug must be true or false",
        "{}.a-b: v1 jobEnvs keys must match ^\\w+$ (letters, digits and '_')",
        "{}.x: v1 jobEnvs values must be strings, numbers or booleans",
        "extras.a b: v1 extras keys must match ^[A-Za-z0-9._]+$",
    ]
    assert [str(p) for p in read.value.problems] == [e.format("jobEnvs") for e in expected]
    assert [str(p) for p in written.value.problems] == [e.format("parameters") for e in expected]
