"""OpenPAI v2 YAML (protocolVersion 2): every rule of the schema and its cross-checks, with field paths."""

from __future__ import annotations

import pytest

from pai_jupyter.protocol import Job, detect_version
from tests.helpers.jobdocs import assert_problem, problems_of, v2_doc, v2_role, valid

QUICK = """\
protocolVersion: 2
name: demo
type: job
prerequisites:
  - {name: img, type: dockerimage, uri: "python:3.11"}
taskRoles:
  worker:
    dockerImage: img
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands: [echo hi]
"""


def test_minimal_job_and_its_defaults() -> None:
    job = Job.from_text(QUICK)
    assert job.source_format == "v2"
    assert job.name == "demo" and job.image == "python:3.11"
    (role,) = job.task_roles
    assert (role.name, role.instances, role.cpu, role.memory_mb, role.gpu, role.shm_mb) == ("worker", 1, 1, 256, 0, 64)
    assert (role.min_failed, role.min_succeeded, role.task_retry_count) == (1, None, 0)
    assert role.docker_image == "img" and role.commands == ["echo hi"]
    assert job.retry_count == 0 and job.virtual_cluster == "default" and job.default_deployment is None


@pytest.mark.parametrize("version", [2, "2"])
def test_protocol_version_2_or_string_2(version: object) -> None:
    assert valid(v2_doc(protocolVersion=version)).name == "job1"


@pytest.mark.parametrize("version", [1, 3, "2.0", None, 2.5, True])
def test_other_protocol_versions_are_rejected(version: object) -> None:
    assert_problem(v2_doc(protocolVersion=version), "protocolVersion", "must be 2 or '2'")


def test_a_taskroles_mapping_without_protocol_version_is_v2() -> None:
    doc = v2_doc()
    del doc["protocolVersion"]
    assert detect_version(doc) == "v2"
    assert_problem(doc, "protocolVersion", "is required")


# ---- name, type, version ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "A_b-1", "x" * 255, "-", "_"])
def test_name_accepts_the_pattern(name: str) -> None:
    assert valid(v2_doc(name=name)).name == name


@pytest.mark.parametrize("name", ["a.b", "a~b", "a b", "", "ü"])
def test_name_rejects_other_characters(name: str) -> None:
    assert_problem(v2_doc(name=name), "name", "job names may use only letters, digits, '_' and '-'")


def test_name_is_at_most_255_characters() -> None:
    assert_problem(v2_doc(name="x" * 256), "name", "must be at most 255 characters (got 256)")


@pytest.mark.parametrize("kind", ["service", "Job", None, 1])
def test_type_must_be_job(kind: object) -> None:
    assert_problem(v2_doc(type=kind), "type", "must be 'job'")


@pytest.mark.parametrize("version", ["1.0", 1, 1.5])
def test_version_is_a_string_or_number(version: object) -> None:
    assert valid(v2_doc(version=version)).version == version


@pytest.mark.parametrize("version", [True, [1], {"a": 1}])
def test_version_of_another_type_is_rejected(version: object) -> None:
    assert_problem(v2_doc(version=version), "version", "must be a string or a number")


def test_unknown_top_level_keys_are_rejected() -> None:
    assert_problem(v2_doc(jobName="x"), "jobName", "is not a known field (unknown keys are rejected")
    assert_problem(v2_doc(virtualCluster="vc"), "virtualCluster", "is not a known field")


def test_an_unknown_field_names_the_closest_known_one() -> None:
    """A misspelt field is told the name it was probably meant to be, from the fields of the mapping it is in."""
    assert_problem(v2_doc({"w": v2_role(comands=["x"])}), "taskRoles.w.comands", "; did you mean 'commands'?")
    res = {"cpu": 1, "memoryMb": 256, "gpu": 0}
    assert_problem(
        v2_doc({"w": v2_role(resourcePerInstance=res)}),
        "taskRoles.w.resourcePerInstance.memoryMb",
        "did you mean 'memoryMB'?",
    )
    assert_problem(v2_doc(jobName="x"), "jobName", "did you mean 'name'?")
    found = problems_of(v2_doc(zzzz=1))  # nothing close: no guess
    assert found == ["zzzz: is not a known field (unknown keys are rejected, as OpenPAI does)"]


def test_optional_top_level_fields() -> None:
    job = valid(
        v2_doc(
            contributor="me",
            description="d",
            parameters={"lr": 0.1, "name": "x"},
            secrets={"token": "s3cret"},
            jobRetryCount=2,
        )
    )
    assert (job.contributor, job.description, job.retry_count) == ("me", "d", 2)
    assert job.parameters == {"lr": 0.1, "name": "x"} and job.secrets == {"token": "s3cret"}
    assert_problem(v2_doc(jobRetryCount=-1), "jobRetryCount", "-1 is below the minimum 0")
    assert_problem(v2_doc(parameters=["a"]), "parameters", "must be a mapping")
    assert_problem(v2_doc(secrets="x"), "secrets", "must be a mapping")
    assert_problem(v2_doc(description=3), "description", "must be a string")


# ---- prerequisites ------------------------------------------------------------------------------------------


def image(**over: object) -> dict[str, object]:
    return {"name": "img", "type": "dockerimage", "uri": "python:3.11", **over}


def test_dockerimage_needs_a_uri() -> None:
    p = image()
    del p["uri"]
    assert_problem(v2_doc(prerequisites=[p]), "prerequisites[0].uri", "is required: the image to run")
    assert_problem(v2_doc(prerequisites=[image(uri="  ")]), "prerequisites[0].uri", "is required")


def test_dockerimage_auth_and_no_other_keys() -> None:
    job = valid(v2_doc(prerequisites=[image(auth={"username": "u", "password": "p", "registryuri": "r.io"})]))
    assert job.prerequisites[0].auth == {"username": "u", "password": "p", "registryuri": "r.io"}
    # OpenPAI's auth schema is open (other keys pass) but types its three fields; base fields are allowed
    valid(v2_doc(prerequisites=[image(auth={"user": "u"}, protocolVersion=2, version="1", contributor="c")]))
    assert_problem(
        v2_doc(prerequisites=[image(auth={"username": 1})]), "prerequisites[0].auth.username", "must be a string"
    )
    assert_problem(v2_doc(prerequisites=[image(auth="u:p")]), "prerequisites[0].auth", "must be a mapping")
    assert_problem(
        v2_doc(prerequisites=[image(plugin="x")]),
        "prerequisites[0].plugin",
        "is not a known field of a dockerimage prerequisite",
    )


def test_data_uri_is_a_list() -> None:
    data = {"name": "d", "type": "data", "uri": ["hdfs://a", "hdfs://b"]}
    job = valid(v2_doc(prerequisites=[image(), data], taskRoles={"w": v2_role(data="d")}))
    assert job.prerequisite("data", "d").uri == ["hdfs://a", "hdfs://b"]
    assert_problem(
        v2_doc(prerequisites=[image(), {**data, "uri": "hdfs://a"}]),
        "prerequisites[1].uri",
        "must be a list of strings",
    )
    valid(v2_doc(prerequisites=[image(), {**data, "uri": []}]))  # OpenPAI's server takes both: a plugin may fill it
    valid(v2_doc(prerequisites=[image(), {"name": "d", "type": "data"}]))
    assert_problem(
        v2_doc(prerequisites=[image(), {**data, "uri": [1]}]), "prerequisites[1].uri", "must be a list of strings"
    )


@pytest.mark.parametrize("kind", ["script", "output"])
def test_script_and_output_uri_is_a_string(kind: str) -> None:
    assert_problem(
        v2_doc(prerequisites=[image(), {"name": "s", "type": kind, "uri": ["u"]}]),
        "prerequisites[1].uri",
        "must be a string",
    )
    valid(v2_doc(prerequisites=[image(), {"name": "s", "type": kind}]))  # optional, as on OpenPAI
    job = valid(v2_doc(prerequisites=[image(), {"name": "s", "type": kind, "plugin": "cmd", "callbacks": []}]))
    assert job.prerequisites[1].options == {"plugin": "cmd", "callbacks": []}


def test_prerequisite_type_and_name() -> None:
    assert_problem(
        v2_doc(prerequisites=[image(), {"name": "x", "type": "model", "uri": "u"}]),
        "prerequisites[1].type",
        "'model' must be",
    )
    assert_problem(
        v2_doc(prerequisites=[image(), {"type": "data", "uri": ["u"]}]), "prerequisites[1].name", "is required"
    )
    assert_problem(
        v2_doc(prerequisites=[image(), {"name": "", "type": "data", "uri": ["u"]}]),
        "prerequisites[1].name",
        "job names may use only",
    )
    assert_problem(
        v2_doc(prerequisites=[image(), {"name": "a.b", "type": "data", "uri": ["u"]}]),
        "prerequisites[1].name",
        "job names may use only",
    )


def test_no_duplicate_type_and_name() -> None:
    assert_problem(
        v2_doc(prerequisites=[image(), image(uri="other")]),
        "prerequisites[1]",
        "a dockerimage prerequisite named 'img' is already declared",
    )
    # the same name under another type is fine
    valid(v2_doc(prerequisites=[image(), {"name": "img", "type": "data", "uri": ["u"]}]))


def test_unhashable_prerequisite_names_are_a_validation_error() -> None:
    found = problems_of(
        v2_doc(
            prerequisites=[
                image(),
                {"name": ["a"], "type": "data", "uri": ["u"]},
                {"name": ["a"], "type": "data", "uri": ["u"]},
            ]
        )
    )
    assert "prerequisites[1].name: must be a string, got a list" in found


# ---- taskRoles ----------------------------------------------------------------------------------------------


def test_role_name_pattern_message_names_the_role() -> None:
    found = problems_of(v2_doc({"1worker": v2_role()}))
    assert found == [
        "taskRoles.1worker: role names must match ^[a-zA-Z_][a-zA-Z0-9_]*$ "
        "(start with a letter or '_', then letters, digits, '_')"
    ]


@pytest.mark.parametrize("name", ["worker-1", "a.b", "a~b", "", "wörker"])
def test_role_names_that_v2_rejects(name: str) -> None:
    assert_problem(v2_doc({name: v2_role()}), f"taskRoles.{name}", "role names must match")


@pytest.mark.parametrize("name", ["_", "_w", "Worker_2", "w"])
def test_role_names_that_v2_accepts(name: str) -> None:
    assert valid(v2_doc({name: v2_role()})).task_roles[0].name == name


def test_task_roles_must_be_a_non_empty_mapping() -> None:
    assert_problem(v2_doc({}), "taskRoles", "must have at least 1 item")
    assert_problem(v2_doc(taskRoles=[v2_role()]), "taskRoles", "must be a mapping")


def test_roles_keep_their_order() -> None:
    job = valid(v2_doc({"b": v2_role(), "a": v2_role(), "c": v2_role()}))
    assert [r.name for r in job.task_roles] == ["b", "a", "c"]


def test_instances_and_completion() -> None:
    job = valid(v2_doc({"w": v2_role(instances=4, completion={"minFailedInstances": -1, "minSucceededInstances": 4})}))
    role = job.task_roles[0]
    assert (role.instances, role.min_failed, role.min_succeeded) == (4, None, 4)
    # OpenPAI (k8s.js): null and 0 mean the defaults (1 failed task fails the job; every task ends it), -1 "never"
    for failed, succeeded in ((None, None), (0, 0), (None, -1)):
        role = valid(
            v2_doc(
                {
                    "w": v2_role(
                        instances=4, completion={"minFailedInstances": failed, "minSucceededInstances": succeeded}
                    )
                }
            )
        ).task_roles[0]
        assert (role.min_failed, role.min_succeeded) == (1, None)
    assert_problem(
        v2_doc({"w": v2_role(completion={"minSucceededInstances": -2})}),
        "taskRoles.w.completion.minSucceededInstances",
        "-2 is below the minimum -1",
    )
    assert_problem(v2_doc({"w": v2_role(instances=0)}), "taskRoles.w.instances", "0 is below the minimum 1")
    assert_problem(v2_doc({"w": v2_role(instances="2")}), "taskRoles.w.instances", "must be an integer")
    assert_problem(
        v2_doc({"w": v2_role(instances=2, completion={"minSucceededInstances": 3})}),
        "taskRoles.w.completion.minSucceededInstances",
        "3 is more than the role's 2 tasks",
    )
    assert_problem(
        v2_doc({"w": v2_role(completion={"minFailedInstances": "1"})}),
        "taskRoles.w.completion.minFailedInstances",
        "must be an integer, got a string",
    )
    assert_problem(
        v2_doc({"w": v2_role(completion={"minFailed": 1})}), "taskRoles.w.completion.minFailed", "is not a known field"
    )


def test_task_retry_count() -> None:
    assert valid(v2_doc({"w": v2_role(taskRetryCount=2)})).task_roles[0].task_retry_count == 2
    assert_problem(v2_doc({"w": v2_role(taskRetryCount=-1)}), "taskRoles.w.taskRetryCount", "below the minimum 0")


def test_docker_image_is_required_and_must_name_a_dockerimage_prerequisite() -> None:
    role = v2_role()
    del role["dockerImage"]
    assert_problem(v2_doc({"w": role}), "taskRoles.w.dockerImage", "is required")
    assert_problem(
        v2_doc({"w": v2_role(dockerImage="nope")}),
        "taskRoles.w.dockerImage",
        "'nope' does not name a dockerimage prerequisite",
    )
    # a data prerequisite of that name is not an image
    doc = v2_doc({"w": v2_role(dockerImage="d")}, prerequisites=[image(), {"name": "d", "type": "data", "uri": ["u"]}])
    assert_problem(doc, "taskRoles.w.dockerImage", "'d' does not name a dockerimage prerequisite")


def test_roles_pick_their_own_image() -> None:
    doc = v2_doc(
        {"a": v2_role(), "b": v2_role(dockerImage="gpu")}, prerequisites=[image(), image(name="gpu", uri="cuda:12")]
    )
    job = valid(doc)
    assert [job.image_for(r) for r in job.task_roles] == ["python:3.11", "cuda:12"]


@pytest.mark.parametrize("kind", ["data", "output", "script"])
def test_data_output_script_references(kind: str) -> None:
    uri: object = ["u"] if kind == "data" else "u"
    prereqs = [image(), {"name": "p", "type": kind, "uri": uri}]
    assert getattr(valid(v2_doc({"w": v2_role(**{kind: "p"})}, prerequisites=prereqs)).task_roles[0], kind) == "p"
    assert_problem(
        v2_doc({"w": v2_role(**{kind: "q"})}, prerequisites=prereqs),
        f"taskRoles.w.{kind}",
        f"'q' does not name a {kind} prerequisite",
    )
    # OpenPAI types the reference as a string: an explicit null is refused, not read as "none"
    assert problems_of(v2_doc({"w": v2_role(**{kind: None})})) == [f"taskRoles.w.{kind}: must not be null"]


def test_an_explicit_null_auth_or_uri_is_refused_as_openpai_does() -> None:
    assert problems_of(v2_doc(prerequisites=[image(auth=None)])) == ["prerequisites[0].auth: must not be null"]
    data = {"name": "d", "type": "data", "uri": None}
    assert problems_of(v2_doc(prerequisites=[image(), data])) == ["prerequisites[1].uri: must not be null"]
    assert problems_of(v2_doc(prerequisites=[image(uri=None)])) == [
        "prerequisites[0].uri: is required: the image to run, e.g. python:3.11"
    ]


def test_role_prerequisites_must_exist() -> None:
    prereqs = [image(), {"name": "s", "type": "script", "uri": "u"}]
    assert valid(v2_doc({"w": v2_role(prerequisites=["s", "img"])}, prerequisites=prereqs))
    assert_problem(
        v2_doc({"w": v2_role(prerequisites=["s", "zz"])}, prerequisites=prereqs),
        "taskRoles.w.prerequisites[1]",
        "'zz' does not name a prerequisite",
    )


def test_extra_container_options() -> None:
    job = valid(v2_doc({"w": v2_role(extraContainerOptions={"shmMB": 256, "infiniband": True})}))
    assert job.task_roles[0].shm_mb == 256 and job.task_roles[0].extra_container_options == {"infiniband": True}
    shm = "taskRoles.w.extraContainerOptions.shmMB"
    assert_problem(v2_doc({"w": v2_role(extraContainerOptions={"shmMB": 513})}), shm, "513 is more than memoryMB 512")
    assert_problem(v2_doc({"w": v2_role(extraContainerOptions={"shmMB": -1})}), shm, "below the minimum 0")
    # OpenPAI passes other options through (its schema is open there)
    job = valid(v2_doc({"w": v2_role(extraContainerOptions={"privileged": True})}))
    assert job.task_roles[0].extra_container_options == {"privileged": True}
    assert_problem(
        v2_doc({"w": v2_role(extraContainerOptions={"infiniband": 1})}),
        "taskRoles.w.extraContainerOptions.infiniband",
        "must be true or false",
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cpu", 0, "0 is below the minimum 1"),
        ("memoryMB", 99, "99 is below the minimum 100"),
        ("gpu", -1, "-1 is below the minimum 0"),
        ("cpu", 1.5, "must be an integer, got a number"),
        ("gpu", "1", "must be an integer, got a string"),
    ],
)
def test_resource_per_instance_minimums(field: str, value: object, message: str) -> None:
    res = {"cpu": 1, "memoryMB": 512, "gpu": 0, field: value}
    assert_problem(
        v2_doc({"w": v2_role(resourcePerInstance=res, extraContainerOptions={"shmMB": 0})}),
        f"taskRoles.w.resourcePerInstance.{field}",
        message,
    )


@pytest.mark.parametrize("field", ["cpu", "memoryMB", "gpu"])
def test_resource_per_instance_requires_each_number(field: str) -> None:
    res = {"cpu": 1, "memoryMB": 512, "gpu": 0}
    del res[field]
    assert_problem(
        v2_doc({"w": v2_role(resourcePerInstance=res)}), f"taskRoles.w.resourcePerInstance.{field}", "is required"
    )


def test_resource_per_instance_is_required() -> None:
    role = v2_role()
    del role["resourcePerInstance"]
    assert_problem(v2_doc({"w": role}), "taskRoles.w.resourcePerInstance", "is required")


def test_ports_are_label_to_count() -> None:
    res = {"cpu": 1, "memoryMB": 512, "gpu": 0, "ports": {"http": 1, "nccl_x": 4}}
    job = valid(v2_doc({"w": v2_role(resourcePerInstance=res)}))
    assert [(p.label, p.count, p.begin_at) for p in job.task_roles[0].ports] == [("http", 1, 0), ("nccl_x", 4, 0)]
    assert_problem(
        v2_doc({"w": v2_role(resourcePerInstance={**res, "ports": {}})}),
        "taskRoles.w.resourcePerInstance.ports",
        "must name at least one port",
    )
    for bad, path, message in [
        ({"http": 0}, "http", "0 is below the minimum 1"),
        ({"a b": 1}, "a b", "port labels must match"),
        ({"nccl.x": 1}, "nccl.x", "port labels must match"),
        ({"http": "1"}, "http", "must be an integer"),
    ]:
        doc = v2_doc({"w": v2_role(resourcePerInstance={**res, "ports": bad})})
        assert_problem(doc, f"taskRoles.w.resourcePerInstance.ports.{path}", message)


def test_commands_need_one_non_blank_command() -> None:
    assert valid(v2_doc({"w": v2_role(commands=["", "echo a"])})).task_roles[0].command == "echo a"
    assert_problem(v2_doc({"w": v2_role(commands=[])}), "taskRoles.w.commands", "must have at least 1 item")
    assert_problem(
        v2_doc({"w": v2_role(commands=[" ", ""])}), "taskRoles.w.commands", "must hold at least one non-blank command"
    )
    assert_problem(v2_doc({"w": v2_role(commands="echo a")}), "taskRoles.w.commands", "must be a list")
    assert_problem(v2_doc({"w": v2_role(commands=["a", 1])}), "taskRoles.w.commands[1]", "must be a string")


def test_unknown_role_keys_are_rejected() -> None:
    assert_problem(v2_doc({"w": v2_role(command="x")}), "taskRoles.w.command", "is not a known field")


# ---- deployments and defaults -------------------------------------------------------------------------------


def deployment(name: str = "dep", **roles: object) -> dict[str, object]:
    default = {"worker": {"preCommands": ["echo pre"], "postCommands": ["echo post"]}}
    return {"name": name, "taskRoles": roles or default}


def test_deployments_and_default_deployment() -> None:
    job = valid(v2_doc(deployments=[deployment()], defaults={"deployment": "dep", "virtualCluster": "vc1"}))
    assert job.default_deployment == "dep" and job.virtual_cluster == "vc1"
    phase = job.role_commands(job.task_roles[0])
    assert (phase.pre_commands, phase.post_commands) == (["echo pre"], ["echo post"])


def test_default_deployment_must_exist() -> None:
    assert_problem(
        v2_doc(defaults={"deployment": "prod"}), "defaults.deployment", "'prod' is not one of the job's deployments"
    )
    assert_problem(
        v2_doc(deployments=[deployment("a")], defaults={"deployment": "b"}),
        "defaults.deployment",
        "'b' is not one of the job's deployments",
    )
    valid(v2_doc(defaults={"cluster": "x"}))  # OpenPAI's defaults schema is open


def test_deployment_rules() -> None:
    assert_problem(v2_doc(deployments=[deployment(), deployment()]), "deployments[1].name", "'dep' is declared twice")
    assert_problem(
        v2_doc(deployments=[deployment(ps={"preCommands": ["x"]})]),
        "deployments[0].taskRoles.ps",
        "'ps' is not a task role of this job",
    )
    assert_problem(
        v2_doc(deployments=[deployment(worker={"pre": ["x"]})]),
        "deployments[0].taskRoles.worker.pre",
        "is not a known field",
    )
    assert_problem(
        v2_doc(deployments=[deployment(worker={"preCommands": "x"})]),
        "deployments[0].taskRoles.worker.preCommands",
        "must be a list",
    )
    assert_problem(v2_doc(deployments=[{"taskRoles": {}}]), "deployments[0].name", "is required")


# ---- extras -------------------------------------------------------------------------------------------------


def plugins(*entries: object) -> dict[str, object]:
    return {"com.microsoft.pai.runtimeplugin": list(entries)}


def test_known_runtime_plugins() -> None:
    extras = {
        **plugins(
            {"plugin": "ssh", "parameters": {"jobssh": True}},
            {"plugin": "tensorboard", "parameters": {"port": 6006, "logdir": {"a": "/tmp"}}},
            {"plugin": "cmd", "parameters": {"preCommands": ["a"]}},
            {"plugin": "cmd", "failurePolicy": "ignore"},
            {"plugin": "jupyter", "failurePolicy": "fail"},
        ),
        "gangAllocation": False,
        "storages": [{"name": "home", "mountPath": "/mnt/home"}],
    }
    job = valid(v2_doc(extras=extras))
    assert [p["plugin"] for p in job.runtime_plugins] == ["ssh", "tensorboard", "cmd", "cmd", "jupyter"]
    assert job.gang_allocation is False


@pytest.mark.parametrize(
    ("extras", "path", "message"),
    [
        (
            plugins({"plugin": "vnc"}),
            "extras.com.microsoft.pai.runtimeplugin[0].plugin",
            "'vnc' is not a known runtime plugin",
        ),
        (
            {"com.microsoft.pai.runtimeplugin": {"plugin": "ssh"}},
            "extras.com.microsoft.pai.runtimeplugin",
            "must be a list",
        ),
        (plugins("ssh"), "extras.com.microsoft.pai.runtimeplugin[0]", "must be a mapping with a 'plugin' name"),
        (
            plugins({"plugin": "ssh"}, {"plugin": "ssh"}),
            "extras.com.microsoft.pai.runtimeplugin[1].plugin",
            "the ssh plugin is declared twice",
        ),
        (
            plugins({"plugin": "tensorboard", "parameters": {"port": 70000}}),
            "extras.com.microsoft.pai.runtimeplugin[0].parameters.port",
            "70000 is not a port number (1..65535)",
        ),
        (
            plugins({"plugin": "ssh", "parameters": [1]}),
            "extras.com.microsoft.pai.runtimeplugin[0].parameters",
            "must be a mapping",
        ),
        (
            plugins({"plugin": "ssh", "failurePolicy": "retry"}),
            "extras.com.microsoft.pai.runtimeplugin[0].failurePolicy",
            "'retry' must be 'ignore' or 'fail'",
        ),
        ({"gangAllocation": "yes"}, "extras.gangAllocation", "must be true or false"),
        ({"storages": {"name": "x"}}, "extras.storages", "must be a list"),
        ({"storages": [{"mountPath": "/x"}]}, "extras.storages[0]", "must be a mapping with a string 'name'"),
        ({"maxRunTimeMinutes": 0}, "extras.maxRunTimeMinutes", "minutes"),
        ({"maxRunTimeMinutes": "1h"}, "extras.maxRunTimeMinutes", "minutes"),
    ],
)
def test_extras_rules(extras: dict[str, object], path: str, message: str) -> None:
    assert_problem(v2_doc(extras=extras), path, message)


def test_other_extras_pass_through() -> None:
    assert valid(v2_doc(extras={"submitFrom": "notebook", "hivedScheduler": {"x": 1}})).extras == {
        "submitFrom": "notebook",
        "hivedScheduler": {"x": 1},
    }
    assert_problem(v2_doc(extras=[1]), "extras", "must be a mapping")


def test_v1_facts_in_extras_are_checked() -> None:
    key = "pai_jupyter.v1"
    assert_problem(v2_doc(extras={key: {"gpuType": 5}}), f"extras.{key}.gpuType", "must be a string")
    assert_problem(
        v2_doc(extras={key: {"portBeginAt": {"worker": {"http": -1}}}}),
        f"extras.{key}.portBeginAt.worker.http",
        "must be a port number >= 0",
    )
    assert_problem(v2_doc(extras={key: ["x"]}), f"extras.{key}", "must be a mapping")


def test_every_problem_is_listed_at_once() -> None:
    doc = v2_doc(
        {"1w": v2_role(), "ok": v2_role(instances=0, dockerImage="nope", commands=[])},
        name="a.b",
        type="service",
        jobRetryCount=-1,
        extras={"gangAllocation": 1},
    )
    paths = sorted(p.split(": ")[0] for p in problems_of(doc))
    assert paths == sorted(
        [
            "name",
            "type",
            "jobRetryCount",
            "taskRoles.1w",
            "taskRoles.ok.instances",
            "taskRoles.ok.commands",
            "taskRoles.ok.dockerImage",
            "extras.gangAllocation",
        ]
    )
