"""v1 <-> v2 conversion (OpenPAI's mapping), builders, source text, parsing errors, rendering and masking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pai_jupyter.protocol import (
    MASK,
    ConversionError,
    Deployment,
    Job,
    JobValidationError,
    Port,
    Prerequisite,
    RoleCommands,
    TaskRole,
    job_from_document,
    load_document,
    mask_document,
    masked_text,
    render,
    render_commands,
)
from pai_jupyter.protocol.load import job_from_served_config
from tests.helpers.jobdocs import v1_doc, v1_role, v2_doc, v2_role, valid

JOBS = Path(__file__).resolve().parents[2] / "notebooks" / "jobs"

FULL_V1 = v1_doc(
    v1_role(
        name="worker",
        taskNumber=2,
        cpuNumber=2,
        memoryMB=1000,
        shmMB=128,
        gpuNumber=1,
        portList=[{"label": "http", "beginAt": 0, "portNumber": 2}],
        command="python t.py",
        minFailedTaskCount=None,
        minSucceededTaskCount=2,
    ),
    jobName="cifar",
    image="tf:1",
    dataDir="hdfs://d",
    outputDir="hdfs://o",
    codeDir="hdfs://c",
    virtualCluster="vc",
    retryCount=2,
    jobEnvs={"LR": "0.1", "N": 3},
)


def problem_paths(exc: JobValidationError) -> list[str]:
    return [p.path for p in exc.problems]


# ---- v1 -> v2 -----------------------------------------------------------------------------------------------


def test_v1_to_v2_follows_openpai_converter() -> None:
    v2 = valid(FULL_V1).to_v2()
    assert (v2["protocolVersion"], v2["name"], v2["type"], v2["jobRetryCount"]) == (2, "cifar", "job", 2)
    # image -> dockerimage prerequisite "default"; dirs -> data / output / script prerequisites
    assert v2["prerequisites"] == [
        {"name": "default", "type": "dockerimage", "uri": "tf:1"},
        {"name": "data", "type": "data", "uri": ["hdfs://d"]},
        {"name": "output", "type": "output", "uri": "hdfs://o"},
        {"name": "code", "type": "script", "uri": "hdfs://c"},
    ]
    assert v2["parameters"] == {"LR": "0.1", "N": 3}  # jobEnvs -> parameters
    assert v2["defaults"] == {"virtualCluster": "vc", "deployment": "default"}
    assert v2["taskRoles"] == {
        "worker": {
            "instances": 2,  # taskNumber
            "completion": {"minFailedInstances": -1, "minSucceededInstances": 2},  # min*TaskCount (null: never fail)
            "taskRetryCount": 0,
            "dockerImage": "default",
            "data": "data",
            "output": "output",
            "script": "code",
            "extraContainerOptions": {"shmMB": 128},  # shmMB
            "resourcePerInstance": {"cpu": 2, "memoryMB": 1000, "gpu": 1, "ports": {"http": 2}},  # portList
            "commands": ["python t.py"],  # command
        }
    }
    # jobEnvs and the dirs become export pre-commands of the "default" deployment
    assert v2["deployments"] == [
        {
            "name": "default",
            "taskRoles": {
                "worker": {
                    "preCommands": [
                        "export PAI_DATA_DIR=hdfs://d",
                        "export PAI_OUTPUT_DIR=hdfs://o",
                        "export PAI_CODE_DIR=hdfs://c",
                        "export LR=0.1",
                        "export N=3",
                    ]
                }
            },
        }
    ]  # no empty postCommands
    assert "extras" not in v2


def test_v1_to_v2_output_is_valid_v2_and_means_the_same() -> None:
    job = valid(FULL_V1)
    again = job_from_document(job.to_v2())
    assert again.source_format == "v2"
    assert again == job
    assert Job.from_text(job.to_yaml()) == job


def test_exports_are_shell_quoted() -> None:
    job = valid(v1_doc(jobEnvs={"MSG": "hello world; rm -rf /", "FLAG": True}))
    pre = job.to_v2()["deployments"][0]["taskRoles"]["main"]["preCommands"]
    assert pre == ["export MSG='hello world; rm -rf /'", "export FLAG=true"]
    assert render_commands(job, job.task_roles[0]) == "export MSG='hello world; rm -rf /'\nexport FLAG=true\necho hi"


def test_v1_only_facts_survive_a_v2_round_trip() -> None:
    doc = v1_doc(
        v1_role(
            portList=[
                {"label": "ssh", "beginAt": 2222, "portNumber": 1},
                {"label": "http", "beginAt": 0, "portNumber": 2},
            ]
        ),
        gpuType="K80",
        authFile="hdfs://x/auth",
    )
    job = valid(doc)
    v2 = job.to_v2()
    assert v2["extras"] == {
        "pai_jupyter.v1": {"gpuType": "K80", "authFile": "hdfs://x/auth", "portBeginAt": {"main": {"ssh": 2222}}}
    }
    back = Job.from_text(job.to_yaml())
    assert back == job
    assert (back.gpu_type, back.auth_file) == ("K80", "hdfs://x/auth")
    assert [(p.label, p.begin_at) for p in back.task_roles[0].ports] == [("ssh", 2222), ("http", 0)]
    v1 = back.to_v1()
    assert v1["gpuType"] == "K80" and v1["authFile"] == "hdfs://x/auth"
    assert v1["taskRoles"][0]["portList"] == doc["taskRoles"][0]["portList"]
    assert back.extras == {}  # the carrier key is not a user extra


def test_v1_round_trip_through_v1() -> None:
    job = valid(FULL_V1)
    v1 = job.to_v1()
    assert job_from_document(v1) == job
    assert v1["jobEnvs"] == {"LR": "0.1", "N": 3} and v1["dataDir"] == "hdfs://d" and v1["codeDir"] == "hdfs://c"
    assert v1["taskRoles"][0]["command"] == "python t.py"


def test_null_job_env_survives_v1_round_trip() -> None:
    job = valid(v1_doc(jobEnvs={"EMPTY": None}))
    assert job_from_document(job.to_v1()) == job


def test_v2_names_that_v1_allows_but_v2_does_not() -> None:
    with pytest.raises(ConversionError) as info:
        valid(v1_doc(v1_role(name="a.b"), jobName="my.job~1")).to_v2()
    assert problem_paths(info.value) == ["name", "task_roles[0].name"]
    assert "v2 names allow only letters, digits, '_' and '-'" in str(info.value)
    assert str(info.value).startswith("my.job~1 cannot be written as v2")


# ---- v2 -> v1 -----------------------------------------------------------------------------------------------


def test_simple_v2_job_converts_to_v1() -> None:
    job = valid(
        v2_doc(
            {"w": v2_role(instances=2, commands=["cd /x", "python a.py"], completion={"minSucceededInstances": 1})},
            jobRetryCount=1,
        )
    )
    assert job.to_v1() == {
        "jobName": "job1",
        "image": "python:3.11",
        "retryCount": 1,
        "taskRoles": [
            {
                "name": "w",
                "taskNumber": 2,
                "cpuNumber": 1,
                "memoryMB": 512,
                "shmMB": 64,
                "gpuNumber": 0,
                "command": "cd /x\npython a.py",
                "minFailedTaskCount": 1,
                "minSucceededTaskCount": 1,
            }
        ],
    }
    valid(job.to_v1())


def two_images() -> dict[str, object]:
    return v2_doc(
        {"a": v2_role(), "b": v2_role(dockerImage="gpu")},
        prerequisites=[
            {"name": "img", "type": "dockerimage", "uri": "a"},
            {"name": "gpu", "type": "dockerimage", "uri": "b"},
        ],
    )


@pytest.mark.parametrize(
    ("doc", "path", "message"),
    [
        (two_images(), "prerequisites", "v1 has one image per job; this job has 2 images"),
        (v2_doc(secrets={"pw": "x"}), "secrets", "v1 has no secrets"),
        (
            v2_doc(
                deployments=[{"name": "d", "taskRoles": {"worker": {"preCommands": ["pip install x"]}}}],
                defaults={"deployment": "d"},
            ),
            "deployments.d.worker",
            "v1 has no pre/post commands other than its jobEnv exports",
        ),
        (
            v2_doc(deployments=[{"name": "d", "taskRoles": {"worker": {"postCommands": ["echo done"]}}}]),
            "deployments.d.worker",
            "v1 has no pre/post commands",
        ),
        (v2_doc({"worker": v2_role(taskRetryCount=1)}), "task_roles[0].task_retry_count", "v1 has no per-role retry"),
        (
            v2_doc({"worker": v2_role(extraContainerOptions={"infiniband": True})}),
            "task_roles[0].extra_container_options",
            "v1 has only shmMB",
        ),
        (v2_doc(description="x"), "description", "v1 has no such field"),
        (
            v2_doc(prerequisites=[{"name": "img", "type": "dockerimage", "uri": "a", "auth": {"username": "u"}}]),
            "prerequisites",
            "v1 has no registry auth",
        ),
        (
            v2_doc(
                prerequisites=[
                    {"name": "img", "type": "dockerimage", "uri": "a"},
                    {"name": "d", "type": "data", "uri": ["a", "b"]},
                ]
            ),
            "prerequisites",
            "v1's dataDir is one path; 'd' has several uris",
        ),
        (v2_doc(parameters={"lr": [1, 2]}), "parameters.lr", "v1 jobEnvs values must be strings, numbers or booleans"),
        (v2_doc(parameters={"my-param": "1"}), "parameters.my-param", "v1 jobEnvs keys must match ^\\w+$"),
        (v2_doc(parameters={"isDebug": "yes"}), "parameters.isDebug", "v1's isDebug must be true or false"),
        (v2_doc(extras={"my-extra": 1}), "extras.my-extra", "v1 extras keys must match ^[A-Za-z0-9._]+$"),
        (
            v2_doc({"worker": v2_role(prerequisites=["img"])}),
            "task_roles[0].prerequisites",
            "v1 has no per-role prerequisites",
        ),
        (
            v2_doc(
                prerequisites=[
                    {"name": "img", "type": "dockerimage", "uri": "a"},
                    {"name": "s", "type": "script", "plugin": "cmd", "callbacks": []},
                ]
            ),
            "prerequisites",
            "v1's codeDir is one path; 's' has no uri",
        ),
    ],
)
def test_to_v1_names_what_v1_cannot_express(doc: dict[str, object], path: str, message: str) -> None:
    job = valid(doc)
    with pytest.raises(ConversionError) as info:
        job.to_v1()
    assert isinstance(info.value, JobValidationError)
    assert path in problem_paths(info.value), str(info.value)
    assert any(p.path == path and message in p.message for p in info.value.problems), str(info.value)
    assert str(info.value).startswith("job1 cannot be written as v1")


def test_to_v1_lists_every_problem() -> None:
    doc = two_images()
    doc["secrets"] = {"a": "b"}
    doc["description"] = "x"
    with pytest.raises(ConversionError) as info:
        valid(doc).to_v1()
    assert problem_paths(info.value) == ["prerequisites", "secrets", "description"]


def test_to_v1_accepts_its_own_export_deployment() -> None:
    job = valid(v1_doc(jobEnvs={"A": "1"}, dataDir="/d"))
    assert job_from_document(job_from_document(job.to_v2()).to_v1()) == job


# ---- source text --------------------------------------------------------------------------------------------


def test_source_text_is_kept_verbatim() -> None:
    text = '{ "jobName": "x",\n  "image": "i", "taskRoles": [' + json.dumps(v1_role()) + "] }\n"
    job = Job.from_text(text)
    assert job.source_text == text
    yml = "# keep this comment\n" + yaml.safe_dump(v2_doc(), sort_keys=True) + "\n\n"
    job2 = Job.from_text(yml.encode())
    assert job2.source_text == yml and job2.source_format == "v2"
    built = Job(name="a", image="i", task_roles=[TaskRole(name="m", command="x")])
    assert built.source_text is None and built.source_format == "python"


def test_from_file(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("# hi\n" + yaml.safe_dump(v2_doc()))
    job = Job.from_file(path)
    assert job.source_text == path.read_text() and job.name == "job1"
    with pytest.raises(JobValidationError) as info:
        Job.from_file(tmp_path / "missing.yaml")
    assert info.value.source == str(tmp_path / "missing.yaml")
    assert str(info.value.problems[0]) == "cannot read the file: No such file or directory"
    with pytest.raises(JobValidationError) as info:
        Job.from_file(tmp_path)
    assert str(info.value.problems[0]) == "cannot read the file: Is a directory"


def test_from_file_reads_a_bounded_amount() -> None:
    with pytest.raises(JobValidationError) as info:
        Job.from_file("/dev/zero")
    assert [str(p) for p in info.value.problems] == ["the file is larger than the limit of 4194304 bytes"]


@pytest.mark.parametrize("name", sorted(p.name for p in JOBS.iterdir()))
def test_example_jobs_validate(name: str) -> None:
    job = Job.from_file(JOBS / name)
    assert job.task_roles and job.image
    assert job.source_format == ("v1" if name.endswith(".json") else "v2")
    assert job_from_document(job.to_v2()) == job


# ---- parsing errors -----------------------------------------------------------------------------------------


def only_problem(data: str | bytes) -> str:
    with pytest.raises(JobValidationError) as info:
        Job.from_text(data, source="f")
    assert type(info.value) is JobValidationError
    assert len(info.value.problems) == 1 and info.value.source == "f"
    return str(info.value.problems[0])


def test_json_syntax_error_gives_line_and_column() -> None:
    assert (
        only_problem('{\n  "jobName": "x",\n  "image": \n}') == "JSON syntax error at line 4, column 1: Expecting value"
    )


def test_yaml_syntax_error_gives_line_and_column() -> None:
    msg = only_problem("protocolVersion: 2\nname: x\ntaskRoles:\n  a: [1, 2\n")
    assert msg.startswith("YAML syntax error at line 5, column 1:")
    msg = only_problem("name: x\n  bad: indent\n")
    assert msg.startswith("YAML syntax error at line 2, column 6:")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("", "the document is empty"),
        ("  \n\n", "the document is empty"),
        ("# only a comment\n", "a job must be a mapping of fields, but the document is empty"),
        ("- a\n- b\n", "a job must be a mapping of fields, but the document is a list"),
        ("42", "a job must be a mapping of fields, but the document is a int"),
        (b"jobName: \xff\xfe\n", "the document is not valid UTF-8 (byte 9)"),
        ("jobName: a\x00b", "the document contains a NUL character"),
        ("{1: 2}", "JSON syntax error at line 1, column 2: Expecting property name enclosed in double quotes"),
        ("1: x\n", "field names must be strings, got 1"),
        ("? [1]\n: x\n", "YAML syntax error at line 1, column 3: found unhashable key"),
        (
            "a: !!python/object:os.system x\n",
            "YAML syntax error at line 1, column 4: could not determine a constructor",
        ),
        ('{"a": ' * 100_000, "the document is nested too deeply"),
        ("a: \x07", "YAML error at character 4: unacceptable character #x0007"),
    ],
)
def test_unreadable_documents(data: str | bytes, message: str) -> None:
    assert only_problem(data).startswith(message)


@pytest.mark.parametrize(
    "text", ["[" * 100_000, "x: " + "{a: " * 5_000, "- " * 5_000 + "x", "".join(" " * i + "- \n" for i in range(2_000))]
)
def test_deep_yaml_nesting_is_refused_quickly(text: str) -> None:
    assert "nest" in only_problem(text)


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def test_moderate_nesting_is_accepted_and_can_be_masked_and_dumped() -> None:
    doc = v2_doc(extras={"deep": nested(90)}, secrets={"s": "x"})
    text = json.dumps(doc)
    job = Job.from_text(text)
    assert json.loads(masked_text(text, doc))["secrets"] == MASK
    assert Job.from_text(job.to_yaml()) == job


@pytest.mark.parametrize("where", ["extras", "parameters", "secrets"])
def test_deep_nesting_inside_a_valid_job_is_refused(where: str) -> None:
    doc = v2_doc(**{where: {"deep": nested(500)}})
    assert only_problem(json.dumps(doc)) == "the document is nested too deeply (more than 100 levels)"
    with pytest.raises(JobValidationError) as info:
        job_from_document(doc)
    assert [str(p) for p in info.value.problems] == ["the document is nested too deeply (more than 100 levels)"]
    with pytest.raises(JobValidationError) as info:
        Job(name="j", image="i", task_roles=[TaskRole(name="m", command="x")], **{where: {"deep": nested(500)}})
    assert [str(p) for p in info.value.problems] == [f"{where}: nests more than 100 levels deep"]


def test_huge_document_is_refused() -> None:
    assert only_problem("a: " + "x" * (4 * 1024 * 1024)).startswith("the document is 4194307 bytes; the limit is")


def test_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
        f"*a{i - 1}, *a{i - 1}]"
        for i in range(1, 9)
    ]
    assert only_problem("\n".join(lines)) == "the document expands to more than 200000 values"


def test_huge_integer_is_a_problem_not_a_crash() -> None:
    assert "the document cannot be read" in only_problem('{"jobName": ' + "9" * 5000 + "}")
    assert "the document cannot be read" in only_problem("jobName: " + "9" * 5000)


def test_load_document_returns_the_mapping() -> None:
    assert load_document('{"a": [1]}') == {"a": [1]}
    assert load_document(b"\xef\xbb\xbfa: 1\n") == {"a": 1}


# ---- builders -----------------------------------------------------------------------------------------------


def test_builder_defaults() -> None:
    job = Job(name="mnist", image="python:3.11", task_roles=[TaskRole(name="main", command="python train.py")])
    role = job.task_roles[0]
    assert (role.instances, role.cpu, role.memory_mb, role.shm_mb, role.gpu) == (1, 1, 1024, 64, 0)
    assert (role.min_failed, role.min_succeeded, role.task_retry_count, role.ports) == (1, None, 0, [])
    assert role.commands == ["python train.py"] and role.command == "python train.py"
    assert job.image == "python:3.11" and job.virtual_cluster == "default" and job.retry_count == 0
    assert job.prerequisites == [Prerequisite(name="default", type="dockerimage", uri="python:3.11")]
    assert job.total_tasks == 1 and job.gang_allocation is True
    assert job.to_v1() == {
        "jobName": "mnist",
        "image": "python:3.11",
        "retryCount": 0,
        "taskRoles": [
            {
                "name": "main",
                "taskNumber": 1,
                "cpuNumber": 1,
                "memoryMB": 1024,
                "shmMB": 64,
                "gpuNumber": 0,
                "command": "python train.py",
                "minFailedTaskCount": 1,
                "minSucceededTaskCount": None,
            }
        ],
    }
    assert job_from_document(job.to_v1()) == job_from_document(job.to_v2())


def test_builder_summary() -> None:
    job = Job(
        name="dist",
        image="img",
        task_roles=[
            TaskRole(name="ps", command="a", cpu=2, memory_mb=2048, ports=[Port(label="grpc")]),
            TaskRole(
                name="worker",
                command="b",
                instances=3,
                gpu=1,
                memory_mb=512,
                shm_mb=128,
                ports=[Port(label="http", count=2), Port(label="ssh")],
            ),
        ],
    )
    assert job.summary() == (
        "dist: 2 roles, 4 tasks, CPU 5, GPU 3, memory 3.5 GiB (image img)\n"
        "  ps: 1 x (CPU 2, GPU 0, memory 2.0 GiB, shm 64 MB, ports grpc x1)\n"
        "  worker: 3 x (CPU 1, GPU 1, memory 512 MB, shm 128 MB, ports http x2, ssh x1)"
    )
    first = valid(v1_doc()).summary().splitlines()[0]
    assert first == "job1: 1 role, 1 task, CPU 1, GPU 0, memory 512 MB (image python:3.11)"


def test_builder_errors_name_the_field() -> None:
    with pytest.raises(JobValidationError) as info:
        TaskRole(name="main", command="x", memory_mb=50, cpu=0)
    assert sorted(map(str, info.value.problems)) == [
        "cpu: 0 is below the minimum 1",
        "memory_mb: 50 is below the minimum 100",
    ]
    with pytest.raises(JobValidationError) as info:
        Job(name="bad name", image="i", task_roles=[{"name": "main", "command": "x", "memory_mb": 50}])
    assert sorted(map(str, info.value.problems)) == [
        "name: 'bad name': job names may use only letters, digits, '-', '.', '_' and '~'",
        "task_roles[0].memory_mb: 50 is below the minimum 100",
    ]


def test_a_builders_misspelt_keyword_names_the_closest_field() -> None:
    with pytest.raises(JobValidationError) as info:
        Job(name="j", image="i", task_roles=[{"name": "main", "command": "x", "memory": 512}])
    assert [str(p) for p in info.value.problems] == [
        "task_roles[0].memory: is not a known field (unknown keys are rejected, as OpenPAI does); "
        "did you mean 'memory_mb'?"
    ]


def test_builder_cross_field_rules_have_paths() -> None:
    with pytest.raises(JobValidationError) as info:
        TaskRole(
            name="m",
            command="x",
            memory_mb=200,
            shm_mb=300,
            instances=2,
            min_failed=3,
            ports=[Port(label="a"), Port(label="a")],
        )
    assert sorted(map(str, info.value.problems)) == [
        "min_failed: 3 is more than the role's 2 tasks",
        "ports[1].label: 'a' is used twice in this role",
        "shm_mb: 300 is more than memoryMB 200",
    ]
    with pytest.raises(JobValidationError) as info:
        Job(name="j", image="i", task_roles=[TaskRole(name="m", command="x"), TaskRole(name="m", command="y")])
    assert [str(p) for p in info.value.problems] == [
        "task_roles[1].name: 'm' is used by another task role; role names are unique"
    ]
    with pytest.raises(JobValidationError) as info:
        Job(name="j", task_roles=[TaskRole(name="m", command="x")])
    assert [str(p) for p in info.value.problems] == ["image: a docker image is required"]
    with pytest.raises(JobValidationError) as info:
        Job(name="j", image="i", task_roles=[{"name": "m", "commands": ["  "]}])
    assert [str(p) for p in info.value.problems] == ["task_roles[0].commands: must hold at least one non-blank command"]


def test_builder_rejects_what_v2_would_reject() -> None:
    role = TaskRole(name="m", command="x")
    cases = [
        (dict(image=""), "prerequisites[0].uri", "the image to run"),
        (
            dict(image="i", deployments=[Deployment(name="d", task_roles={"zz": RoleCommands(pre_commands=["a"])})]),
            "deployments[0].task_roles.zz",
            "'zz' is not a task role of this job",
        ),
        (
            dict(image="i", deployments=[Deployment(name="d"), Deployment(name="d")]),
            "deployments[1].name",
            "'d' is declared twice",
        ),
        (
            dict(image="i", default_deployment="nope"),
            "default_deployment",
            "'nope' is not one of the job's deployments",
        ),
        (
            dict(image="i", task_roles=[TaskRole(name="m", command="x", prerequisites=["nope"])]),
            "task_roles[0].prerequisites[0]",
            "'nope' does not name a prerequisite",
        ),
        (
            dict(image="i", task_roles=[{"name": "m", "command": "x", "extra_container_options": {"shmMB": 9}}]),
            "task_roles[0].extra_container_options.shmMB",
            "shared memory is shm_mb",
        ),
        (dict(image="i", extras={"pai_jupyter.v1": {}}), "extras.pai_jupyter.v1", "reserved"),
    ]
    for kwargs, path, message in cases:
        kwargs.setdefault("task_roles", [role])
        with pytest.raises(JobValidationError) as info:
            Job(name="j", **kwargs)
        assert any(p.path == path and message in p.message for p in info.value.problems), (path, info.value)


def test_builder_assignment_raises_the_one_error_type() -> None:
    job = Job(name="j", image="i", task_roles=[TaskRole(name="m", command="x")])
    with pytest.raises(JobValidationError) as info:
        job.name = "bad name"
    assert info.value.problems[0].path == "name"
    with pytest.raises(JobValidationError) as info:
        job.task_roles[0].memory_mb = 10
    assert str(info.value.problems[0]) == "memory_mb: 10 is below the minimum 100"
    assert job.name == "j" and job.task_roles[0].memory_mb == 1024


def test_builder_union_fields_give_one_plain_problem() -> None:
    with pytest.raises(JobValidationError) as info:
        Prerequisite(name="d", type="data", uri=5)
    assert [str(p) for p in info.value.problems] == ["uri: must be a string or a list of strings, got an integer"]


def test_builder_command_or_commands() -> None:
    assert TaskRole(name="m", commands=["a", "b"]).command == "a\nb"
    with pytest.raises(JobValidationError, match="give either command or commands, not both"):
        TaskRole(name="m", command="a", commands=["b"])


def test_equality_ignores_where_a_job_came_from() -> None:
    a = Job(name="j", image="i", task_roles=[TaskRole(name="m", command="x")])
    b = Job.from_text(json.dumps(a.to_v1()))
    assert a == b and b.source_format == "v1"
    assert a != Job(name="j", image="i", task_roles=[TaskRole(name="m", command="y")])


# ---- rendering ----------------------------------------------------------------------------------------------


def render_job() -> Job:
    return valid(
        v2_doc(
            {
                "worker": v2_role(
                    data="ds",
                    script="code",
                    output="out",
                    commands=[
                        "python <% $script.uri %>/train.py --data <% $data.uri[0] %> --lr <% $parameters.lr %>",
                        "echo <%$parameters.flag%> <% $output.uri %> <% $secrets.token %>",
                        "echo <% $parameters.missing %> <% $unknown.x %> <% $data.uri[5] %> <% $parameters.nested %>",
                    ],
                )
            },
            prerequisites=[
                {"name": "img", "type": "dockerimage", "uri": "i"},
                {"name": "ds", "type": "data", "uri": ["hdfs://a", "hdfs://b"]},
                {"name": "code", "type": "script", "uri": "git://repo"},
                {"name": "out", "type": "output", "uri": "hdfs://out"},
            ],
            parameters={"lr": 0.01, "flag": True, "nested": {"a": 1}},
            secrets={"token": "s3cret"},
            deployments=[
                {
                    "name": "d",
                    "taskRoles": {
                        "worker": {"preCommands": ["echo pre <% $parameters.lr %>"], "postCommands": ["echo post"]}
                    },
                }
            ],
            defaults={"deployment": "d"},
        )
    )


def test_render_commands_substitutes_every_scope() -> None:
    job = render_job()
    assert render_commands(job, job.task_roles[0]).splitlines() == [
        "echo pre 0.01",
        "python git://repo/train.py --data hdfs://a --lr 0.01",
        "echo true hdfs://out s3cret",
        # a job with secrets: OpenPAI's runtime renders what its server could not find empty; an object is JS's
        "echo    [object Object]",
        "echo post",
    ]


@pytest.mark.parametrize(
    ("text", "out"),
    [
        ("<% $parameters.x %>", "1"),
        ("a<%$parameters.x%>b", "a1b"),
        ("<%   $parameters.x   %>", "1"),
        ("<% $parameters.y %>", "<% $parameters.y %>"),
        ("<% $nope.x %>", "<% $nope.x %>"),
        ("<%parameters.x%>", "<% parameters.x %>"),  # written back as OpenPAI's server writes it
        ("<% $parameters.none %>", "<% $parameters.none %>"),  # a null too
        ("<% $parameters.list[1] %>", "b"),
        ("<% $parameters.list[7] %>", "<% $parameters.list.7 %>"),
        ("<% $parameters.list %>", "a,b"),  # JavaScript's array to string
        ("<% $parameters.list.length %>", "2"),
        ("<% $parameters.x %> and <% $parameters.x %>", "1 and 1"),
        ("$parameters.x", "$parameters.x"),
    ],
)
def test_render(text: str, out: str) -> None:
    assert render(text, {"parameters": {"x": 1, "none": None, "list": ["a", "b"]}}) == out


# ---- masking ------------------------------------------------------------------------------------------------


def secret_doc() -> dict[str, object]:
    return v2_doc(
        secrets={"token": "s3cret", "pw": "hunter2"},
        prerequisites=[
            {
                "name": "img",
                "type": "dockerimage",
                "uri": "i",
                "auth": {"username": "u", "password": "<% $secrets.pw %>", "registryuri": "r"},
            }
        ],
    )


def test_mask_document() -> None:
    doc = secret_doc()
    masked = mask_document(doc)
    assert masked["secrets"] == MASK == "******"  # the whole block, as OpenPAI's config route answers
    assert masked["prerequisites"][0]["auth"] == {"username": "u", "password": MASK, "registryuri": "r"}
    assert doc["secrets"] == {"token": "s3cret", "pw": "hunter2"}  # the original is untouched
    assert masked["taskRoles"] == doc["taskRoles"]


def test_masked_text() -> None:
    plain = yaml.safe_dump(v2_doc())
    assert masked_text("# comment\n" + plain, v2_doc()) == "# comment\n" + plain
    doc = secret_doc()
    text = yaml.safe_dump(doc)
    out = masked_text(text, doc)
    assert "s3cret" not in out and "hunter2" not in out and "secrets.pw" not in out
    assert yaml.safe_load(out) == mask_document(doc)
    out_json = masked_text(json.dumps(doc), doc)
    assert json.loads(out_json) == mask_document(doc)
    assert job_from_served_config(out).secrets == {}  # withheld: read without them, none invented
