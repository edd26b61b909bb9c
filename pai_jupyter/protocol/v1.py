"""OpenPAI v1 JSON (seed 001, table 6.3.2): the wire schema, its rules, and conversion to and from the model."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConversionError, JobValidationError, Problem, problems_from_pydantic
from .model import DEFAULT_IMAGE_PREREQ, V1_EXTRAS_KEY, Deployment, Job, Port, Prerequisite, RoleCommands, TaskRole
from .rules import (
    ENV_KEY,
    EXTRAS_KEY,
    SCALAR,
    EnvKey,
    ExtrasKey,
    NonEmpty,
    PortLabel,
    V1JobName,
    V1RoleName,
    check_extras,
    check_min_counts,
    check_scalar_values,
    is_int,
)

COMPAT_DEPLOYMENT = "default"
DIR_PREREQS = (("dataDir", "data", "data", "PAI_DATA_DIR"), ("outputDir", "output", "output", "PAI_OUTPUT_DIR"),
               ("codeDir", "script", "code", "PAI_CODE_DIR"))


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class V1Port(_Wire):
    label: PortLabel
    beginAt: int = Field(ge=0)
    portNumber: int = Field(ge=1)


class V1TaskRole(_Wire):
    name: V1RoleName
    taskNumber: int = Field(ge=1)
    cpuNumber: int = Field(ge=1)
    memoryMB: int = Field(ge=100)
    shmMB: int = Field(64, ge=0)
    gpuNumber: int = Field(ge=0)
    portList: list[V1Port] = Field(default_factory=list)
    command: NonEmpty
    minFailedTaskCount: int | None = Field(1, ge=1)
    minSucceededTaskCount: int | None = Field(None, ge=1)


class V1Job(_Wire):
    jobName: V1JobName
    image: NonEmpty
    authFile: str = ""
    dataDir: str = ""
    outputDir: str = ""
    codeDir: str = ""
    virtualCluster: str = "default"
    gpuType: str = ""
    retryCount: int = Field(0, ge=0)
    jobEnvs: dict[EnvKey, Any] = Field(default_factory=dict)
    extras: dict[ExtrasKey, Any] = Field(default_factory=dict)
    taskRoles: list[V1TaskRole] = Field(min_length=1)


def _cross_checks(doc: dict[str, Any]) -> list[Problem]:
    """Rules between fields, run on the raw document so they are reported beside the field errors."""
    out: list[Problem] = []
    image = doc.get("image")
    if isinstance(image, str) and image and not image.strip():
        out.append(Problem("image", "must not be blank"))
    roles = doc.get("taskRoles")
    if isinstance(roles, list):
        # keep positions (None for a non-mapping entry) so index() below is the entry's own index
        names = [r.get("name") if isinstance(r, dict) else None for r in roles]
        for i, role in enumerate(roles):
            if not isinstance(role, dict):
                continue
            path = f"taskRoles[{i}]"
            name = role.get("name")
            if isinstance(name, str) and names.count(name) > 1 and names.index(name) != i:
                out.append(Problem(f"{path}.name", f"{name!r} is used by another task role; role names are unique"))
            shm, mem = role.get("shmMB", 64), role.get("memoryMB")
            if is_int(shm) and is_int(mem) and shm > mem:
                out.append(Problem(f"{path}.shmMB", f"{shm} is more than memoryMB {mem}"))
            cmd = role.get("command")
            if isinstance(cmd, str) and cmd and not cmd.strip():
                out.append(Problem(f"{path}.command", "must not be blank"))
            out += check_min_counts(role, "taskNumber", "minFailedTaskCount", "minSucceededTaskCount", path)
            ports = role.get("portList")
            if isinstance(ports, list):
                labels = [p.get("label") if isinstance(p, dict) else None for p in ports]
                for j, p in enumerate(ports):
                    lab = p.get("label") if isinstance(p, dict) else None
                    if isinstance(lab, str) and labels.index(lab) != j:
                        out.append(Problem(f"{path}.portList[{j}].label", f"{lab!r} is used twice in this role"))
    envs = doc.get("jobEnvs")
    if isinstance(envs, dict):
        if "isDebug" in envs and not isinstance(envs["isDebug"], bool):
            out.append(Problem("jobEnvs.isDebug", "must be true or false"))
        out += check_scalar_values(envs, "jobEnvs", "jobEnvs")
    extras = doc.get("extras")
    if isinstance(extras, dict) and V1_EXTRAS_KEY in extras:
        out.append(Problem(f"extras.{V1_EXTRAS_KEY}", "is reserved: pai_jupyter keeps a v1 job's gpuType, authFile "
                                                      "and port beginAt there when it writes v2"))
    out += check_extras(extras, "extras")
    return out


def _env_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def compat_exports(job_envs: dict[str, Any], dirs: dict[str, str]) -> list[str]:
    """The pre-commands OpenPAI's converter adds: export each jobEnv and PAI_DATA/OUTPUT/CODE_DIR."""
    lines = [f"export {env}={shlex.quote(value)}" for env, value in dirs.items()]
    lines += [f"export {k}={shlex.quote(_env_value(v))}" for k, v in job_envs.items()]
    return lines


def job_from_v1(doc: dict[str, Any], *, source: str | None = None) -> Job:
    """Validate a v1 document and convert it the way OpenPAI's v1 -> v2 converter does."""
    problems: list[Problem] = []
    wire: V1Job | None = None
    try:
        wire = V1Job.model_validate(doc)
    except ValidationError as exc:
        problems += problems_from_pydantic(exc)
    problems += _cross_checks(doc)
    if problems or wire is None:
        raise JobValidationError(_dedupe(problems), source)

    prereqs = [Prerequisite(name=DEFAULT_IMAGE_PREREQ, type="dockerimage", uri=wire.image)]
    dirs: dict[str, str] = {}
    refs: dict[str, str] = {}
    for field, kind, name, env in DIR_PREREQS:
        value = getattr(wire, field)
        if value:
            prereqs.append(Prerequisite(name=name, type=kind, uri=[value] if kind == "data" else value))
            dirs[env] = value
            refs[kind] = name
    exports = compat_exports(wire.jobEnvs, dirs)
    roles = []
    for r in wire.taskRoles:
        roles.append(TaskRole(
            name=r.name, instances=r.taskNumber, cpu=r.cpuNumber, memory_mb=r.memoryMB, shm_mb=r.shmMB,
            gpu=r.gpuNumber, commands=[r.command], min_failed=r.minFailedTaskCount,
            min_succeeded=r.minSucceededTaskCount, docker_image=DEFAULT_IMAGE_PREREQ,
            ports=[Port(label=p.label, count=p.portNumber, begin_at=p.beginAt) for p in r.portList],
            data=refs.get("data"), output=refs.get("output"), script=refs.get("script"),
        ))
    deployments = []
    if exports:
        deployments.append(Deployment(name=COMPAT_DEPLOYMENT, task_roles={
            r.name: RoleCommands(pre_commands=list(exports)) for r in wire.taskRoles}))
    job = Job(
        name=wire.jobName, task_roles=roles, prerequisites=prereqs, virtual_cluster=wire.virtualCluster,
        retry_count=wire.retryCount, parameters=dict(wire.jobEnvs), extras=dict(wire.extras),
        deployments=deployments, default_deployment=COMPAT_DEPLOYMENT if deployments else None,
        gpu_type=wire.gpuType or None, auth_file=wire.authFile or None,
    )
    job._source_format = "v1"
    return job


def _v1_command(role: TaskRole) -> str:
    """One command is kept as written; several become one script (what the task runs)."""
    return role.commands[0] if len(role.commands) == 1 else role.command


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
    for field in ("description", "contributor", "version"):
        if getattr(job, field) is not None:
            out.append(Problem(field, "v1 has no such field"))
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
                out.append(Problem("prerequisites", f"v1's {field} is a plain path; {found[0].name!r} has "
                                                    f"{', '.join(found[0].options)}"))
            if value is None or value == [] or value == "":
                out.append(Problem("prerequisites", f"v1's {field} is one path; {found[0].name!r} has no uri"))
            elif not isinstance(value, str):
                out.append(Problem("prerequisites", f"v1's {field} is one path; {found[0].name!r} has several uris"))
            else:
                dirs[env] = doc_dirs[field] = value
    for key, value in job.parameters.items():
        if not re.fullmatch(ENV_KEY, key):
            out.append(Problem(f"parameters.{key}", f"v1 jobEnvs keys must match {ENV_KEY}"))
        elif key == "isDebug" and not isinstance(value, bool):
            out.append(Problem(f"parameters.{key}", "v1's isDebug must be true or false"))
        elif value is not None and not isinstance(value, SCALAR):
            out.append(Problem(f"parameters.{key}", "v1 jobEnvs hold only strings, numbers and booleans"))
    out += [Problem(f"extras.{key}", f"v1 extras keys must match {EXTRAS_KEY}")
            for key in job.extras if not re.fullmatch(EXTRAS_KEY, key)]
    expected = compat_exports(job.parameters, dirs)
    for d in job.deployments:
        for role, cmds in d.task_roles.items():
            if cmds.post_commands or (cmds.pre_commands and cmds.pre_commands != expected):
                out.append(Problem(f"deployments.{d.name}.{role}",
                                   "v1 has no pre/post commands other than its jobEnv exports"))
    roles = []
    for i, r in enumerate(job.task_roles):
        if r.task_retry_count:
            out.append(Problem(f"task_roles[{i}].task_retry_count", "v1 has no per-role retry count"))
        if r.extra_container_options:
            out.append(Problem(f"task_roles[{i}].extra_container_options", "v1 has only shmMB"))
        if r.prerequisites:
            out.append(Problem(f"task_roles[{i}].prerequisites", "v1 has no per-role prerequisites"))
        roles.append({
            "name": r.name, "taskNumber": r.instances, "cpuNumber": r.cpu, "memoryMB": r.memory_mb,
            "shmMB": r.shm_mb, "gpuNumber": r.gpu,
            **({"portList": [{"label": p.label, "beginAt": p.begin_at, "portNumber": p.count} for p in r.ports]}
               if r.ports else {}),
            "command": _v1_command(r), "minFailedTaskCount": r.min_failed, "minSucceededTaskCount": r.min_succeeded,
        })
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


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[Problem] = set()
    return [p for p in problems if not (p in seen or seen.add(p))]
