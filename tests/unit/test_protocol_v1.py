"""OpenPAI v1 JSON (the user guide's table 6.3.2): every field and its rule, with the error text naming the field."""

from __future__ import annotations

import json

import pytest

from pai_jupyter.protocol import Job, JobValidationError, detect_version
from tests.helpers.jobdocs import assert_problem, problems_of, v1_doc, v1_role, valid


def test_minimal_job_and_its_defaults() -> None:
    job = valid(v1_doc())
    assert job.source_format == "v1"
    assert job.name == "job1"
    assert job.image == "python:3.11"
    assert job.virtual_cluster == "default"
    assert job.retry_count == 0
    assert job.gpu_type is None and job.auth_file is None
    assert job.parameters == {} and job.extras == {} and job.deployments == []
    (role,) = job.task_roles
    assert (role.name, role.instances, role.cpu, role.memory_mb, role.gpu) == ("main", 1, 1, 512, 0)
    assert role.shm_mb == 64  # the table's default
    assert role.min_failed == 1 and role.min_succeeded is None
    assert role.commands == ["echo hi"] and role.ports == []


def test_v1_yaml_document_is_read_as_v1() -> None:
    text = (
        "jobName: y1\nimage: busybox\ntaskRoles:\n  - {name: a, taskNumber: 2, cpuNumber: 1, memoryMB: 100, "
        "gpuNumber: 0, command: 'true'}\n"
    )
    job = Job.from_text(text)
    assert job.source_format == "v1" and job.task_roles[0].instances == 2
    assert detect_version({"jobName": "x", "taskRoles": {}}) == "v1"


# ---- jobName ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "A-b.c_d~e", "0", "job-2024.01~x", "~", "-"])
def test_job_name_accepts_the_pattern(name: str) -> None:
    assert valid(v1_doc(jobName=name)).name == name


@pytest.mark.parametrize("name", ["a b", "a/b", "a:b", "é", "a\n", "", "job!"])
def test_job_name_rejects_other_characters(name: str) -> None:
    assert_problem(v1_doc(jobName=name), "jobName", "job names may use only letters, digits, '-', '.', '_' and '~'")


def test_job_name_is_required_and_a_string() -> None:
    doc = v1_doc()
    del doc["jobName"]
    assert_problem(doc, "jobName", "is required")
    assert_problem(v1_doc(jobName=7), "jobName", "must be a string, got an integer")


def test_image_is_required_and_not_empty() -> None:
    doc = v1_doc()
    del doc["image"]
    assert_problem(doc, "image", "is required")
    # one rule, one message, whichever format says it (the model's: a dockerimage needs a non-blank uri)
    assert problems_of(v1_doc(image="")) == ["image: is required: the image to run, e.g. python:3.11"]
    assert problems_of(v1_doc(image=" \t")) == ["image: is required: the image to run, e.g. python:3.11"]


# ---- taskRoles ----------------------------------------------------------------------------------------------


def test_task_roles_needs_at_least_one_role() -> None:
    assert_problem(v1_doc(taskRoles=[]), "taskRoles", "must have at least 1 item")
    doc = v1_doc()
    del doc["taskRoles"]
    assert_problem(doc, "taskRoles", "is required")
    assert_problem(v1_doc(taskRoles={"main": v1_role()}), "taskRoles", "must be a list, got a mapping")


@pytest.mark.parametrize("name", ["main", "a.b", "A~1", "_x", "0"])
def test_role_name_accepts_the_pattern(name: str) -> None:
    assert valid(v1_doc(v1_role(name=name))).task_roles[0].name == name


@pytest.mark.parametrize("name", ["a-b", "a b", "", "rôle", "a/b"])
def test_role_name_rejects_other_characters(name: str) -> None:
    assert_problem(v1_doc(v1_role(name=name)), "taskRoles[0].name", "names must match ^[A-Za-z0-9._~]+$")


def test_role_names_are_unique() -> None:
    found = assert_problem(
        v1_doc(v1_role(), v1_role(name="other"), v1_role()),
        "taskRoles[2].name",
        "'main' is used by another task role; role names are unique",
    )
    assert not any(p.startswith("taskRoles[0].name") for p in found)


def test_a_non_mapping_role_does_not_make_the_next_role_a_duplicate() -> None:
    found = problems_of(v1_doc(5, v1_role()))
    assert found == ["taskRoles[0]: must be a mapping (key: value), got an integer"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("taskNumber", 0, "0 is below the minimum 1"),
        ("taskNumber", -3, "-3 is below the minimum 1"),
        ("cpuNumber", 0, "0 is below the minimum 1"),
        ("memoryMB", 99, "99 is below the minimum 100"),
        ("memoryMB", 50, "50 is below the minimum 100"),
        ("gpuNumber", -1, "-1 is below the minimum 0"),
        ("shmMB", -1, "-1 is below the minimum 0"),
    ],
)
def test_role_numbers_have_minimums(field: str, value: int, message: str) -> None:
    role = v1_role(**{field: value})
    if field == "memoryMB":
        role["shmMB"] = 10  # keep shm below memory so only the minimum is reported
    found = assert_problem(v1_doc(role), f"taskRoles[0].{field}", message)
    assert len(found) == 1


def test_the_issue_example_message() -> None:
    doc = v1_doc(v1_role(memoryMB=50, shmMB=32))
    assert problems_of(doc) == ["taskRoles[0].memoryMB: 50 is below the minimum 100"]


def test_boundary_values_are_accepted() -> None:
    job = valid(v1_doc(v1_role(taskNumber=1, cpuNumber=1, memoryMB=100, gpuNumber=0, shmMB=0)))
    role = job.task_roles[0]
    assert (role.instances, role.cpu, role.memory_mb, role.gpu, role.shm_mb) == (1, 1, 100, 0, 0)


@pytest.mark.parametrize("field", ["taskNumber", "cpuNumber", "memoryMB", "gpuNumber", "command", "name"])
def test_required_role_fields(field: str) -> None:
    role = v1_role()
    del role[field]
    assert_problem(v1_doc(role), f"taskRoles[0].{field}", "is required")


@pytest.mark.parametrize(
    ("value", "got"), [("2", "a string"), (True, "a boolean"), (1.5, "a number"), (None, "null"), ([1], "a list")]
)
def test_role_numbers_must_be_integers(value: object, got: str) -> None:
    assert_problem(v1_doc(v1_role(taskNumber=value)), "taskRoles[0].taskNumber", f"must be an integer, got {got}")


def test_shm_defaults_to_64_and_may_not_exceed_memory() -> None:
    assert valid(v1_doc(v1_role(memoryMB=100))).task_roles[0].shm_mb == 64
    assert valid(v1_doc(v1_role(memoryMB=200, shmMB=200))).task_roles[0].shm_mb == 200
    assert_problem(v1_doc(v1_role(memoryMB=200, shmMB=201)), "taskRoles[0].shmMB", "201 is more than memoryMB 200")


def test_command_must_not_be_empty_or_blank() -> None:
    for blank in ("", "  \n\t"):  # the model's rule, as v2 says it of its commands
        assert problems_of(v1_doc(v1_role(command=blank))) == [
            "taskRoles[0].command: must hold at least one non-blank command"
        ]
    assert_problem(v1_doc(v1_role(command=["a", "b"])), "taskRoles[0].command", "must be a string, got a list")


# ---- portList -----------------------------------------------------------------------------------------------


def port(label: str = "http", beginAt: int = 0, portNumber: int = 1) -> dict[str, object]:
    return {"label": label, "beginAt": beginAt, "portNumber": portNumber}


def test_ports_map_to_count_and_begin_at() -> None:
    job = valid(v1_doc(v1_role(portList=[port("http", 0, 1), port("ssh.2", 8000, 3)])))
    ports = job.task_roles[0].ports
    assert [(p.label, p.count, p.begin_at) for p in ports] == [("http", 1, 0), ("ssh.2", 3, 8000)]


@pytest.mark.parametrize(
    ("entry", "path", "message"),
    [
        (port(label="a-b"), "label", "names must match ^[A-Za-z0-9._~]+$"),
        (port(label=""), "label", "names must match"),
        (port(beginAt=-1), "beginAt", "-1 is below the minimum 0"),
        (port(portNumber=0), "portNumber", "0 is below the minimum 1"),
        ({"label": "x", "portNumber": 1}, "beginAt", "is required"),
        ({"label": "x", "beginAt": 0}, "portNumber", "is required"),
        ({"beginAt": 0, "portNumber": 1}, "label", "is required"),
        ({**port(), "protocol": "tcp"}, "protocol", "is not a known field"),
    ],
)
def test_port_rules(entry: dict[str, object], path: str, message: str) -> None:
    assert_problem(v1_doc(v1_role(portList=[port("ok"), entry])), f"taskRoles[0].portList[1].{path}", message)


def test_port_labels_are_unique_within_a_role_only() -> None:
    assert_problem(
        v1_doc(v1_role(portList=[port("http"), port("http", 80)])),
        "taskRoles[0].portList[1].label",
        "'http' is used twice in this role",
    )
    valid(v1_doc(v1_role(portList=[port("http")]), v1_role(name="b", portList=[port("http")])))


def test_a_non_mapping_port_does_not_make_the_next_a_duplicate() -> None:
    found = problems_of(v1_doc(v1_role(portList=["http", port("a")])))
    assert found == ["taskRoles[0].portList[0]: must be a mapping (key: value), got a string"]


# ---- completion counts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["minFailedTaskCount", "minSucceededTaskCount"])
def test_min_counts_null_or_within_task_number(field: str) -> None:
    assert valid(v1_doc(v1_role(taskNumber=3, **{field: None})))
    job = valid(v1_doc(v1_role(taskNumber=3, **{field: 3})))
    attr = "min_failed" if field == "minFailedTaskCount" else "min_succeeded"
    assert getattr(job.task_roles[0], attr) == 3
    assert_problem(v1_doc(v1_role(taskNumber=3, **{field: 0})), f"taskRoles[0].{field}", "0 is below the minimum 1")
    assert_problem(
        v1_doc(v1_role(taskNumber=3, **{field: 4})), f"taskRoles[0].{field}", "4 is more than the role's 3 tasks"
    )
    assert_problem(v1_doc(v1_role(**{field: "1"})), f"taskRoles[0].{field}", "must be an integer")


def test_min_failed_null_disables_the_rule() -> None:
    assert valid(v1_doc(v1_role(minFailedTaskCount=None))).task_roles[0].min_failed is None


# ---- job-level optional fields ------------------------------------------------------------------------------


def test_retry_count() -> None:
    assert valid(v1_doc(retryCount=3)).retry_count == 3
    assert_problem(v1_doc(retryCount=-1), "retryCount", "-1 is below the minimum 0")
    assert_problem(v1_doc(retryCount="1"), "retryCount", "must be an integer, got a string")


def test_job_envs_keys_and_values() -> None:
    job = valid(v1_doc(jobEnvs={"LR": "0.1", "EPOCHS": 3, "isDebug": True, "_x1": None}))
    assert job.parameters == {"LR": "0.1", "EPOCHS": 3, "isDebug": True, "_x1": None}
    assert_problem(v1_doc(jobEnvs={"bad-key": "1"}), "jobEnvs.bad-key", "keys must match ^\\w+$")
    assert_problem(v1_doc(jobEnvs={"a b": "1"}), "jobEnvs.a b", "keys must match")
    assert_problem(v1_doc(jobEnvs={"X": [1, 2]}), "jobEnvs.X", "values must be strings, numbers or booleans")
    assert_problem(v1_doc(jobEnvs=["X=1"]), "jobEnvs", "must be a mapping")


@pytest.mark.parametrize("value", ["true", 1, None, "yes"])
def test_is_debug_must_be_boolean(value: object) -> None:
    assert_problem(v1_doc(jobEnvs={"isDebug": value}), "jobEnvs.isDebug", "must be true or false")


def test_extras_is_an_object() -> None:
    assert valid(v1_doc(extras={"a.b_c": {"anything": [1, 2]}})).extras == {"a.b_c": {"anything": [1, 2]}}
    assert_problem(v1_doc(extras=[1]), "extras", "must be a mapping (key: value), got a list")
    assert_problem(v1_doc(extras={"bad key": 1}), "extras.bad key", "keys must match ^[A-Za-z0-9._]+$")


def test_extras_key_reserved_for_v1_facts_is_rejected() -> None:
    assert_problem(v1_doc(extras={"pai_jupyter.v1": {"gpuType": "x"}}), "extras.pai_jupyter.v1", "reserved")


@pytest.mark.parametrize("field", ["authFile", "dataDir", "outputDir", "codeDir", "virtualCluster", "gpuType"])
def test_string_fields(field: str) -> None:
    assert_problem(v1_doc(**{field: 5}), field, "must be a string, got an integer")


def test_optional_strings_map_onto_the_model() -> None:
    job = valid(
        v1_doc(
            gpuType="V100",
            authFile="hdfs://a/auth",
            virtualCluster="vc1",
            dataDir="hdfs://d",
            outputDir="hdfs://o",
            codeDir="hdfs://c",
        )
    )
    assert (job.gpu_type, job.auth_file, job.virtual_cluster) == ("V100", "hdfs://a/auth", "vc1")
    assert [(p.type, p.name, p.uri) for p in job.prerequisites] == [
        ("dockerimage", "default", "python:3.11"),
        ("data", "data", ["hdfs://d"]),
        ("output", "output", "hdfs://o"),
        ("script", "code", "hdfs://c"),
    ]
    role = job.task_roles[0]
    assert (role.data, role.output, role.script, role.docker_image) == ("data", "output", "code", "default")


def test_unknown_fields_are_rejected() -> None:
    assert_problem(v1_doc(jobname="x"), "jobname", "is not a known field")
    assert_problem(v1_doc(v1_role(gpus=1)), "taskRoles[0].gpus", "is not a known field")
    assert_problem(v1_doc(jobname="x"), "jobname", "did you mean 'jobName'?")
    assert_problem(v1_doc(v1_role(memoryMb=1)), "taskRoles[0].memoryMb", "did you mean 'memoryMB'?")


def test_every_problem_is_listed_at_once() -> None:
    doc = v1_doc(
        v1_role(name="a-b", taskNumber=0, cpuNumber=0, memoryMB=100, command=""),
        jobName="bad name",
        retryCount=-1,
        jobEnvs={"isDebug": "no"},
    )
    found = problems_of(doc)
    paths = sorted(p.split(": ")[0] for p in found)
    assert paths == sorted(
        [
            "jobName",
            "retryCount",
            "taskRoles[0].name",
            "taskRoles[0].taskNumber",
            "taskRoles[0].cpuNumber",
            "taskRoles[0].command",
            "jobEnvs.isDebug",
        ]
    )
    with pytest.raises(JobValidationError) as info:
        Job.from_text(json.dumps(doc), source="bad.json")
    text = str(info.value)
    assert text.startswith("bad.json: invalid job (7 problems)\n")
    assert "  - taskRoles[0].taskNumber: 0 is below the minimum 1" in text.splitlines()
    assert info.value.to_dict()["problems"][0].keys() == {"path", "message"}
