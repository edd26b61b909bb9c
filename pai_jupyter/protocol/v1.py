"""OpenPAI v1 JSON (the user guide's table 6.3.2): the wire schema, its rules, and conversion to and from the model."""

from __future__ import annotations

import json
import re
import shlex
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConversionError, Problem, problems_from_pydantic
from .rules import (
    DEFAULT_IMAGE_PREREQ,
    ENV_KEY,
    EXTRAS_KEY,
    SCALAR,
    Count,
    MemoryMB,
    NonNegative,
    PortLabel,
    V1JobName,
    V1RoleName,
)
from .wire import Wire

if TYPE_CHECKING:
    from .model import Job, TaskRole  # the writers read a Job; the reader gives data (wire.py)

COMPAT_DEPLOYMENT = "default"
DIR_PREREQS = (
    ("dataDir", "data", "data", "PAI_DATA_DIR"),
    ("outputDir", "output", "output", "PAI_OUTPUT_DIR"),
    ("codeDir", "script", "code", "PAI_CODE_DIR"),
)
# The model's field -> the v1 key it is read from (and the path a problem with it is reported at).
V1_JOB_FIELDS = {
    "name": "jobName",
    "task_roles": "taskRoles",
    "virtual_cluster": "virtualCluster",
    "retry_count": "retryCount",
    "parameters": "jobEnvs",
    "extras": "extras",
    "gpu_type": "gpuType",
    "auth_file": "authFile",
}
V1_ROLE_FIELDS = {
    "name": "name",
    "instances": "taskNumber",
    "cpu": "cpuNumber",
    "memory_mb": "memoryMB",
    "shm_mb": "shmMB",
    "gpu": "gpuNumber",
    "ports": "portList",
    "commands": "command",
    "min_failed": "minFailedTaskCount",
    "min_succeeded": "minSucceededTaskCount",
}
V1_PORT_FIELDS = {"label": "label", "count": "portNumber", "begin_at": "beginAt"}


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class V1Port(_Wire):
    label: PortLabel
    beginAt: NonNegative
    portNumber: Count


class V1TaskRole(_Wire):
    name: V1RoleName
    taskNumber: Count
    cpuNumber: Count
    memoryMB: MemoryMB
    shmMB: NonNegative = 64
    gpuNumber: NonNegative
    portList: list[V1Port] = Field(default_factory=list)
    command: str
    minFailedTaskCount: Count | None = 1
    minSucceededTaskCount: Count | None = None


class V1Job(_Wire):
    """The shape of a v1 document: its keys and their JSON types. The rules of the values are the model's."""

    jobName: V1JobName
    image: str
    authFile: str = ""
    dataDir: str = ""
    outputDir: str = ""
    codeDir: str = ""
    virtualCluster: str = "default"
    gpuType: str = ""
    retryCount: NonNegative = 0
    jobEnvs: dict[str, Any] = Field(default_factory=dict)  # keys and values: v1_value_problems
    extras: dict[str, Any] = Field(default_factory=dict)
    taskRoles: list[V1TaskRole] = Field(min_length=1)


def _schema_problems(doc: dict[str, Any]) -> list[Problem]:
    """The document's shape, and the rules only v1 has."""
    out: list[Problem] = []
    try:
        V1Job.model_validate(doc)
    except ValidationError as exc:
        out += problems_from_pydantic(exc, model=V1Job)
    return out + v1_value_problems(doc.get("jobEnvs"), doc.get("extras"), "jobEnvs")


def v1_value_problems(envs: Any, extras: Any, envs_path: str) -> list[Problem]:
    """What only v1 requires: jobEnvs are exported into each task's shell, and its extras keys are plain. Checked
    when a v1 document is read (``jobEnvs``) and when a job is written as v1 (its ``parameters``)."""
    out: list[Problem] = []
    for key, value in envs.items() if isinstance(envs, dict) else ():
        path = f"{envs_path}.{key}"
        if not isinstance(key, str) or not re.fullmatch(ENV_KEY, key):
            out.append(Problem(path, f"v1 jobEnvs keys must match {ENV_KEY} (letters, digits and '_')"))
        elif key == "isDebug" and not isinstance(value, bool):
            out.append(Problem(path, "v1's isDebug must be true or false"))
        elif value is not None and not isinstance(value, SCALAR):
            out.append(Problem(path, "v1 jobEnvs values must be strings, numbers or booleans"))
    out += [
        Problem(f"extras.{key}", f"v1 extras keys must match {EXTRAS_KEY}")
        for key in (extras if isinstance(extras, dict) else ())
        if not isinstance(key, str) or not re.fullmatch(EXTRAS_KEY, key)
    ]
    return out


def _env_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def compat_exports(job_envs: dict[str, Any], dirs: dict[str, str]) -> list[str]:
    """The pre-commands OpenPAI's converter adds: export each jobEnv and PAI_DATA/OUTPUT/CODE_DIR."""
    lines = [f"export {env}={shlex.quote(value)}" for env, value in dirs.items()]
    lines += [f"export {k}={shlex.quote(_env_value(v))}" for k, v in job_envs.items()]
    return lines


def _role_to_model(raw: Any, i: int, refs: dict[str, str], paths: dict[str, str]) -> Any:
    """One v1 task role as the model's fields (as written, even when wrong: the model's rules judge it)."""
    paths[f"task_roles[{i}]"] = f"taskRoles[{i}]"
    if not isinstance(raw, dict):
        return raw
    role: dict[str, Any] = {"docker_image": DEFAULT_IMAGE_PREREQ, **refs}
    for field, key in V1_ROLE_FIELDS.items():
        paths[f"task_roles[{i}].{field}"] = f"taskRoles[{i}].{key}"
        if key in raw:
            role[field] = raw[key]
    if "command" in raw:
        role["commands"] = [raw["command"]]
    if isinstance(raw.get("portList"), list):
        role["ports"] = []
        for j, port in enumerate(raw["portList"]):
            paths[f"task_roles[{i}].ports[{j}]"] = f"taskRoles[{i}].portList[{j}]"
            if isinstance(port, dict):
                paths.update(
                    {
                        f"task_roles[{i}].ports[{j}].{f}": f"taskRoles[{i}].portList[{j}].{k}"
                        for f, k in V1_PORT_FIELDS.items()
                    }
                )
                port = {f: port[k] for f, k in V1_PORT_FIELDS.items() if k in port}
            role["ports"].append(port)
    return role


def _to_model(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The model's fields for a v1 document, converted the way OpenPAI's v1 -> v2 converter does, and the v1 path
    of each model path."""
    paths = dict(V1_JOB_FIELDS)
    data: dict[str, Any] = {f: doc[k] for f, k in V1_JOB_FIELDS.items() if k in doc}
    for field in ("gpu_type", "auth_file"):
        data[field] = data.get(field) or None
    paths["prerequisites"] = paths["prerequisites[0]"] = paths["prerequisites[0].uri"] = "image"
    prereqs: list[dict[str, Any]] = [{"name": DEFAULT_IMAGE_PREREQ, "type": "dockerimage", "uri": doc.get("image")}]
    dirs: dict[str, str] = {}
    refs: dict[str, str] = {}
    for field, kind, name, env in DIR_PREREQS:
        value = doc.get(field)
        if value:
            paths[f"prerequisites[{len(prereqs)}]"] = paths[f"prerequisites[{len(prereqs)}].uri"] = field
            prereqs.append({"name": name, "type": kind, "uri": [value] if kind == "data" else value})
            refs[kind] = name
            if isinstance(value, str):
                dirs[env] = value
    data["prerequisites"] = prereqs
    roles = doc.get("taskRoles")
    if isinstance(roles, list):
        roles = [_role_to_model(r, i, refs, paths) for i, r in enumerate(roles)]
    data["task_roles"] = roles
    envs = doc.get("jobEnvs")
    exports = compat_exports(envs if isinstance(envs, dict) else {}, dirs)
    names = (
        [r["name"] for r in roles if isinstance(r, dict) and isinstance(r.get("name"), str)]
        if isinstance(roles, list)
        else []
    )
    if exports:
        data["deployments"] = [
            {"name": COMPAT_DEPLOYMENT, "task_roles": {n: {"pre_commands": list(exports)} for n in names}}
        ]
        data["default_deployment"] = COMPAT_DEPLOYMENT
    return data, paths


def v1_path(path: str) -> str:
    """The v1 key a model path is about (``task_roles[0].memory_mb`` -> ``taskRoles[0].memoryMB``), for problems
    found on a Job rather than on a v1 document (a conversion to v1, a builder)."""
    head, _, rest = path.partition(".")
    role = re.match(r"task_roles(\[\d+\])$", head)
    if role:
        field = re.split(r"[.\[]", rest, maxsplit=1)[0]
        return f"taskRoles{role.group(1)}" + (
            f".{V1_ROLE_FIELDS.get(field, field)}{rest[len(field) :]}" if rest else ""
        )
    field = re.split(r"\[", head, maxsplit=1)[0]
    if field == "prerequisites":
        return "image"
    return V1_JOB_FIELDS.get(field, field) + path[len(field) :]


def read_v1(doc: dict[str, Any]) -> Wire:
    """A v1 document converted the way OpenPAI's v1 -> v2 converter does, as the model's data (with the
    document's path of each field) and the problems its schema finds; ``Job.from_dict`` builds the Job."""
    data, paths = _to_model(doc)
    return Wire(data, paths, _schema_problems(doc), "v1")


def _v1_command(role: TaskRole) -> str:
    """One command is kept as written; several become one script (what the task runs)."""
    return role.commands[0] if len(role.commands) == 1 else role.command


FORM_DROPS = ("description", "contributor", "version")  # v2's free text: v1 has no place, a form can do without


def job_to_form_v1(job: Job) -> dict[str, Any]:
    """The v1 JSON a submit form edits (the notebook's JobForm and the Lab's "Clone to form"): the job's v1 JSON,
    dropping what only v2 has free text for (``FORM_DROPS``); anything else v1 cannot express raises as in
    ``job_to_v1``."""
    try:
        return job_to_v1(job)
    except ConversionError as exc:
        if not all(p.path in FORM_DROPS for p in exc.problems):
            raise
    return job_to_v1(job.model_copy(update=dict.fromkeys(FORM_DROPS)))


def job_to_v1(job: Job) -> dict[str, Any]:
    """The v1 JSON for a job, or ConversionError naming every part v1 cannot express."""
    out: list[Problem] = []
    images = [p for p in job.prerequisites if p.type == "dockerimage"]
    if len(images) != 1:
        out.append(Problem("prerequisites", f"v1 has one image per job; this job has {len(images)} images"))
    elif images[0].auth:
        out.append(Problem("prerequisites", "v1 has no registry auth on the image (it used an authFile on HDFS)"))
    if job.secrets:
        out.append(Problem("secrets", "v1 has no secrets"))
    for field in FORM_DROPS:
        if getattr(job, field) is not None:
            out.append(Problem(field, "v1 has no such field"))
    dirs, doc_dirs = _dirs_v1(job, out)
    out += v1_value_problems(job.parameters, job.extras, "parameters")
    expected = compat_exports(job.parameters, dirs)
    for d in job.deployments:
        for role, cmds in d.task_roles.items():
            if cmds.post_commands or (cmds.pre_commands and cmds.pre_commands != expected):
                out.append(
                    Problem(f"deployments.{d.name}.{role}", "v1 has no pre/post commands other than its jobEnv exports")
                )
    roles = [_role_v1(i, r, out) for i, r in enumerate(job.task_roles)]
    if out:
        raise ConversionError(out, f"{job.name} cannot be written as v1")
    doc: dict[str, Any] = {"jobName": job.name, "image": images[0].uri}
    if job.auth_file:
        doc["authFile"] = job.auth_file
    doc.update(doc_dirs)
    if job.virtual_cluster != "default":
        doc["virtualCluster"] = job.virtual_cluster
    if job.gpu_type:
        doc["gpuType"] = job.gpu_type
    doc["retryCount"] = job.retry_count
    if job.parameters:
        doc["jobEnvs"] = dict(job.parameters)
    if job.extras:
        doc["extras"] = dict(job.extras)
    doc["taskRoles"] = roles
    return doc


def _dirs_v1(job: Job, out: list[Problem]) -> tuple[dict[str, str], dict[str, str]]:
    """The job's data/output/code prerequisites as v1's plain paths: (by their env variable, by v1's field);
    what v1 cannot say of them goes to ``out``."""
    dirs: dict[str, str] = {}
    doc_dirs: dict[str, str] = {}
    for field, kind, _name, env in DIR_PREREQS:
        found = [p for p in job.prerequisites if p.type == kind]
        if len(found) > 1:
            out.append(Problem("prerequisites", f"v1 has one {field}; this job has {len(found)} {kind} prerequisites"))
        elif found:
            uri = found[0].uri
            value = uri[0] if isinstance(uri, list) and len(uri) == 1 else uri
            if found[0].options:
                out.append(
                    Problem(
                        "prerequisites",
                        f"v1's {field} is a plain path; {found[0].name!r} has {', '.join(found[0].options)}",
                    )
                )
            if value is None or value == [] or value == "":
                out.append(Problem("prerequisites", f"v1's {field} is one path; {found[0].name!r} has no uri"))
            elif not isinstance(value, str):
                out.append(Problem("prerequisites", f"v1's {field} is one path; {found[0].name!r} has several uris"))
            else:
                dirs[env] = doc_dirs[field] = value
    return dirs, doc_dirs


def _role_v1(i: int, r: TaskRole, out: list[Problem]) -> dict[str, Any]:
    """Task role ``i`` as a v1 taskRole; what v1 has no place for goes to ``out``."""
    if r.task_retry_count:
        out.append(Problem(f"task_roles[{i}].task_retry_count", "v1 has no per-role retry count"))
    if r.extra_container_options:
        out.append(Problem(f"task_roles[{i}].extra_container_options", "v1 has only shmMB"))
    if r.prerequisites:
        out.append(Problem(f"task_roles[{i}].prerequisites", "v1 has no per-role prerequisites"))
    return {
        "name": r.name,
        "taskNumber": r.instances,
        "cpuNumber": r.cpu,
        "memoryMB": r.memory_mb,
        "shmMB": r.shm_mb,
        "gpuNumber": r.gpu,
        **(
            {"portList": [{"label": p.label, "beginAt": p.begin_at, "portNumber": p.count} for p in r.ports]}
            if r.ports
            else {}
        ),
        "command": _v1_command(r),
        "minFailedTaskCount": r.min_failed,
        "minSucceededTaskCount": r.min_succeeded,
    }
