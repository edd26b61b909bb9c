"""OpenPAI v2 YAML (protocolVersion 2): the wire schema, its cross-field rules, and conversion to and from the model."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConversionError, JobValidationError, Problem, format_path, problems_from_pydantic
from .model import V1_EXTRAS_KEY, Deployment, Job, Port, Prerequisite, RoleCommands, TaskRole
from .rules import (
    V2_JOB_NAME,
    V2_ROLE_NAME,
    PortLabel,
    V2JobName,
    V2RoleName,
    check_extras,
    check_min_counts,
    is_int,
)

PREREQ_TYPES = ("dockerimage", "data", "script", "output")


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class V2Prerequisite(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    name: str = Field(min_length=1)
    type: Literal["dockerimage", "data", "script", "output"]


class V2Completion(_Wire):
    minFailedInstances: int | None = Field(1, ge=1)
    minSucceededInstances: int | None = Field(None, ge=1)


class V2ContainerOptions(_Wire):
    shmMB: int = Field(64, ge=0)
    infiniband: bool = False


class V2Resources(_Wire):
    cpu: int = Field(ge=1)
    memoryMB: int = Field(ge=100)
    gpu: int = Field(ge=0)
    ports: dict[PortLabel, int] = Field(default_factory=dict)


class V2TaskRole(_Wire):
    instances: int = Field(1, ge=1)
    completion: V2Completion = Field(default_factory=V2Completion)
    taskRetryCount: int = Field(0, ge=0)
    prerequisites: list[str] = Field(default_factory=list)
    dockerImage: str = Field(min_length=1)
    data: str | None = None
    output: str | None = None
    script: str | None = None
    extraContainerOptions: V2ContainerOptions = Field(default_factory=V2ContainerOptions)
    resourcePerInstance: V2Resources
    commands: list[str] = Field(min_length=1)


class V2RoleCommands(_Wire):
    preCommands: list[str] = Field(default_factory=list)
    postCommands: list[str] = Field(default_factory=list)


class V2Deployment(_Wire):
    name: str = Field(min_length=1)
    taskRoles: dict[str, V2RoleCommands] = Field(default_factory=dict)


class V2Defaults(_Wire):
    virtualCluster: str = "default"
    deployment: str | None = None


class V2Job(_Wire):
    protocolVersion: Literal[2, "2"]
    name: V2JobName
    type: Literal["job"]
    version: Any = None
    contributor: str | None = None
    description: str | None = None
    prerequisites: list[V2Prerequisite] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, Any] = Field(default_factory=dict)
    jobRetryCount: int = Field(0, ge=0)
    taskRoles: dict[V2RoleName, V2TaskRole] = Field(min_length=1)
    deployments: list[V2Deployment] = Field(default_factory=list)
    defaults: V2Defaults = Field(default_factory=V2Defaults)
    extras: dict[str, Any] = Field(default_factory=dict)


def _check_prerequisite(p: dict[str, Any], path: str) -> list[Problem]:
    kind, out = p.get("type"), []
    uri = p.get("uri")
    if kind == "dockerimage":
        allowed = {"name", "type", "uri", "auth", "contributor", "description"}
        out += [Problem(f"{path}.{k}", "is not a known field of a dockerimage prerequisite")
                for k in p if k not in allowed]
        if not isinstance(uri, str) or not uri.strip():
            out.append(Problem(f"{path}.uri", "is required: the image to run, e.g. python:3.11"))
        auth = p.get("auth")
        if auth is not None:
            if not isinstance(auth, dict):
                out.append(Problem(f"{path}.auth", "must be a mapping of username, password, registryuri"))
            else:
                out += [Problem(f"{path}.auth.{k}", "is not one of username, password, registryuri")
                        for k in auth if k not in ("username", "password", "registryuri")]
    elif kind == "data":
        if "plugin" not in p and (not isinstance(uri, list) or not uri):
            out.append(Problem(f"{path}.uri", "must be a list of one or more uris"))
        elif isinstance(uri, list) and not all(isinstance(u, str) for u in uri):
            out.append(Problem(f"{path}.uri", "must be a list of strings"))
    elif kind in ("script", "output") and "plugin" not in p and not isinstance(uri, str):
        out.append(Problem(f"{path}.uri", "is required and must be a string"))
    return out


def _cross_checks(doc: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    version = doc.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, (str, int, float))):
        out.append(Problem("version", "must be a string or a number"))
    prereqs = doc.get("prerequisites")
    declared: dict[str, set[str]] = {t: set() for t in PREREQ_TYPES}
    if isinstance(prereqs, list):
        seen: set[tuple[str, str]] = set()
        for i, p in enumerate(prereqs):
            if not isinstance(p, dict):
                continue
            kind, name = p.get("type"), p.get("name")
            if isinstance(kind, str) and isinstance(name, str):  # other shapes are reported by the schema
                if (kind, name) in seen:
                    out.append(Problem(f"prerequisites[{i}]",
                                       f"a {kind} prerequisite named {name!r} is already declared"))
                seen.add((kind, name))
                declared.setdefault(kind, set()).add(name)
            out += _check_prerequisite(p, f"prerequisites[{i}]")
    all_names = set().union(*declared.values())
    roles = doc.get("taskRoles")
    if isinstance(roles, dict):
        for name, role in roles.items():
            if not isinstance(role, dict):
                continue
            path = f"taskRoles.{name}"
            image = role.get("dockerImage")
            if isinstance(image, str) and image and image not in declared["dockerimage"]:
                out.append(Problem(f"{path}.dockerImage", f"{image!r} does not name a dockerimage prerequisite"))
            for kind in ("data", "output", "script"):
                ref = role.get(kind)
                if isinstance(ref, str) and ref not in declared[kind]:
                    out.append(Problem(f"{path}.{kind}", f"{ref!r} does not name a {kind} prerequisite"))
            refs = role.get("prerequisites")
            if isinstance(refs, list):
                out += [Problem(f"{path}.prerequisites[{j}]", f"{r!r} does not name a prerequisite")
                        for j, r in enumerate(refs) if isinstance(r, str) and r not in all_names]
            res, opts = role.get("resourcePerInstance"), role.get("extraContainerOptions")
            if isinstance(res, dict) and isinstance(opts, dict):
                shm, mem = opts.get("shmMB"), res.get("memoryMB")
                if is_int(shm) and is_int(mem) and shm > mem:
                    out.append(Problem(f"{path}.extraContainerOptions.shmMB", f"{shm} is more than memoryMB {mem}"))
            if isinstance(res, dict) and isinstance(res.get("ports"), dict):
                out += [Problem(f"{path}.resourcePerInstance.ports.{k}", f"{v!r} must be a port count >= 1")
                        for k, v in res["ports"].items() if is_int(v) and v < 1]
            if isinstance(role.get("completion"), dict):
                out += check_min_counts(role, "instances", "minFailedInstances", "minSucceededInstances",
                                        f"{path}.completion", role["completion"])
            commands = role.get("commands")
            if isinstance(commands, list) and commands and all(isinstance(c, str) and not c.strip() for c in commands):
                out.append(Problem(f"{path}.commands", "must hold at least one non-blank command"))
    deployments = doc.get("deployments")
    dep_names: list[str] = []
    if isinstance(deployments, list):
        for i, d in enumerate(deployments):
            if not isinstance(d, dict):
                continue
            dname = d.get("name")
            if dname in dep_names:
                out.append(Problem(f"deployments[{i}].name", f"{dname!r} is declared twice"))
            if isinstance(dname, str):
                dep_names.append(dname)
            if isinstance(d.get("taskRoles"), dict) and isinstance(roles, dict):
                out += [Problem(f"deployments[{i}].taskRoles.{r}", f"{r!r} is not a task role of this job")
                        for r in d["taskRoles"] if r not in roles]
    defaults = doc.get("defaults")
    if isinstance(defaults, dict):
        dep = defaults.get("deployment")
        if isinstance(dep, str) and dep not in dep_names:
            out.append(Problem("defaults.deployment", f"{dep!r} is not one of the job's deployments"))
    extras = doc.get("extras")
    if isinstance(extras, dict) and V1_EXTRAS_KEY in extras:
        out += _check_v1_facts(extras[V1_EXTRAS_KEY], f"extras.{V1_EXTRAS_KEY}")
    out += check_extras(extras, "extras")
    return out


def _check_v1_facts(facts: Any, path: str) -> list[Problem]:
    """The carrier of a v1 job's gpuType, authFile and port beginAt (written by job_to_v2)."""
    if not isinstance(facts, dict):
        return [Problem(path, "must be a mapping of gpuType, authFile, portBeginAt")]
    out = [Problem(f"{path}.{k}", "is not one of gpuType, authFile, portBeginAt")
           for k in facts if k not in ("gpuType", "authFile", "portBeginAt")]
    out += [Problem(f"{path}.{k}", "must be a string") for k in ("gpuType", "authFile")
            if k in facts and not isinstance(facts[k], str)]
    starts = facts.get("portBeginAt", {})
    if not isinstance(starts, dict) or not all(isinstance(v, dict) for v in starts.values()):
        return [*out, Problem(f"{path}.portBeginAt", "must map each role to {label: first port}")]
    out += [Problem(f"{path}.portBeginAt.{role}.{label}", f"{port!r} must be a port number >= 0")
            for role, ports in starts.items() for label, port in ports.items() if not is_int(port) or port < 0]
    return out


def job_from_v2(doc: dict[str, Any], *, source: str | None = None) -> Job:
    """Validate a v2 document (every problem reported at once) and build the model."""
    problems: list[Problem] = []
    wire: V2Job | None = None
    try:
        wire = V2Job.model_validate(doc)
    except ValidationError as exc:
        problems += problems_from_pydantic(exc)
    problems += _cross_checks(doc)
    if problems or wire is None:
        seen: set[Problem] = set()
        raise JobValidationError([p for p in problems if not (p in seen or seen.add(p))], source)

    extras = dict(wire.extras)
    v1_facts = extras.pop(V1_EXTRAS_KEY, None)
    v1_facts = v1_facts if isinstance(v1_facts, dict) else {}
    begin_at = v1_facts.get("portBeginAt") if isinstance(v1_facts.get("portBeginAt"), dict) else {}
    prereqs = []
    for p in wire.prerequisites:
        rest = dict(p.model_extra or {})
        uri = rest.pop("uri", None)
        auth = rest.pop("auth", None) if p.type == "dockerimage" else None
        prereqs.append(Prerequisite(name=p.name, type=p.type, uri=uri, auth=auth, options=rest))
    roles = []
    for name, r in wire.taskRoles.items():
        starts = begin_at.get(name, {}) if isinstance(begin_at.get(name), dict) else {}
        opts = r.extraContainerOptions.model_dump(exclude={"shmMB"}, exclude_defaults=True)
        roles.append(TaskRole(
            name=name, instances=r.instances, cpu=r.resourcePerInstance.cpu,
            memory_mb=r.resourcePerInstance.memoryMB, gpu=r.resourcePerInstance.gpu,
            shm_mb=r.extraContainerOptions.shmMB, extra_container_options=opts,
            ports=[Port(label=k, count=v, begin_at=starts.get(k, 0)) for k, v in r.resourcePerInstance.ports.items()],
            commands=list(r.commands), min_failed=r.completion.minFailedInstances,
            min_succeeded=r.completion.minSucceededInstances, task_retry_count=r.taskRetryCount,
            docker_image=r.dockerImage, data=r.data, output=r.output, script=r.script,
            prerequisites=list(r.prerequisites),
        ))
    deployments = [Deployment(name=d.name, task_roles={
        k: RoleCommands(pre_commands=v.preCommands, post_commands=v.postCommands) for k, v in d.taskRoles.items()})
        for d in wire.deployments]
    job = Job(
        name=wire.name, task_roles=roles, prerequisites=prereqs, virtual_cluster=wire.defaults.virtualCluster,
        retry_count=wire.jobRetryCount, parameters=dict(wire.parameters), secrets=dict(wire.secrets),
        extras=extras, deployments=deployments, default_deployment=wire.defaults.deployment,
        description=wire.description, version=wire.version, contributor=wire.contributor,
        gpu_type=v1_facts.get("gpuType"), auth_file=v1_facts.get("authFile"),
    )
    job._source_format = "v2"
    return job


def job_to_v2(job: Job) -> dict[str, Any]:
    """The v2 document for a job; ConversionError names what v2 cannot express (v1-only name characters)."""
    import re

    out: list[Problem] = []
    if not re.match(V2_JOB_NAME, job.name):
        out.append(Problem("name", f"{job.name!r} is valid in v1 but v2 names allow only letters, digits, '_' and '-'"))
    for i, r in enumerate(job.task_roles):
        if not re.match(V2_ROLE_NAME, r.name):
            out.append(Problem(format_path(["task_roles", i, "name"]),
                               f"{r.name!r} is valid in v1 but v2 role names must match {V2_ROLE_NAME}"))
    if out:
        raise ConversionError(out, f"{job.name} cannot be written as v2")
    first_image = next(p.name for p in job.prerequisites if p.type == "dockerimage")
    doc: dict[str, Any] = {"protocolVersion": 2, "name": job.name, "type": "job"}
    for field in ("version", "contributor", "description"):
        if getattr(job, field) is not None:
            doc[field] = getattr(job, field)
    doc["prerequisites"] = [
        {"name": p.name, "type": p.type, **({"uri": p.uri} if p.uri is not None else {}),
         **({"auth": p.auth} if p.auth is not None else {}), **p.options} for p in job.prerequisites]
    if job.parameters:
        doc["parameters"] = dict(job.parameters)
    if job.secrets:
        doc["secrets"] = dict(job.secrets)
    doc["jobRetryCount"] = job.retry_count
    roles: dict[str, Any] = {}
    begin_at: dict[str, dict[str, int]] = {}
    for r in job.task_roles:
        role: dict[str, Any] = {
            "instances": r.instances,
            "completion": {"minFailedInstances": r.min_failed, "minSucceededInstances": r.min_succeeded},
            "taskRetryCount": r.task_retry_count,
        }
        if r.prerequisites:
            role["prerequisites"] = list(r.prerequisites)
        role["dockerImage"] = r.docker_image or first_image
        for kind in ("data", "output", "script"):
            if getattr(r, kind) is not None:
                role[kind] = getattr(r, kind)
        role["extraContainerOptions"] = {"shmMB": r.shm_mb, **r.extra_container_options}
        resources: dict[str, Any] = {"cpu": r.cpu, "memoryMB": r.memory_mb, "gpu": r.gpu}
        if r.ports:
            resources["ports"] = {p.label: p.count for p in r.ports}
        starts = {p.label: p.begin_at for p in r.ports if p.begin_at}
        if starts:
            begin_at[r.name] = starts
        role["resourcePerInstance"] = resources
        role["commands"] = list(r.commands)
        roles[r.name] = role
    doc["taskRoles"] = roles
    if job.deployments:
        doc["deployments"] = [{"name": d.name, "taskRoles": {
            k: {"preCommands": v.pre_commands, "postCommands": v.post_commands} for k, v in d.task_roles.items()}}
            for d in job.deployments]
    defaults: dict[str, Any] = {}
    if job.virtual_cluster != "default":
        defaults["virtualCluster"] = job.virtual_cluster
    if job.default_deployment is not None:
        defaults["deployment"] = job.default_deployment
    if defaults:
        doc["defaults"] = defaults
    extras = dict(job.extras)
    facts = (("gpuType", job.gpu_type), ("authFile", job.auth_file), ("portBeginAt", begin_at))
    v1_facts = {k: v for k, v in facts if v}
    if v1_facts:
        extras[V1_EXTRAS_KEY] = v1_facts
    if extras:
        doc["extras"] = extras
    return doc
