"""OpenPAI v2 YAML (protocolVersion 2): the wire schema, its cross-field rules, and conversion to and from the model."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConversionError, JobValidationError, Problem, format_path, problems_from_pydantic
from .model import V1_EXTRAS_KEY, Deployment, Job, Port, Prerequisite, RoleCommands, TaskRole
from .rules import (
    V2_JOB_NAME,
    V2_PORT_LABEL,
    V2_ROLE_NAME,
    V2JobName,
    V2PortLabel,
    V2RoleName,
    check_extras,
    check_min_counts,
    is_int,
)

PREREQ_TYPES = ("dockerimage", "data", "script", "output")
PREREQ_BASE = ("protocolVersion", "version", "contributor", "description")


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# OpenPAI merges its base schema (protocolVersion, name, version, contributor, description) into every
# prerequisite and deployment, and lets a task role say its protocolVersion (config/v2/protocol.js).
ProtocolVersion = Literal[2, "2"]


class V2Prerequisite(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    name: V2JobName
    type: Literal["dockerimage", "data", "script", "output"]
    protocolVersion: ProtocolVersion | None = None
    contributor: str | None = None
    description: str | None = None


class V2Completion(_Wire):
    # OpenPAI: -1 (never fail / no count: all tasks end), >= 1, or null / 0 (the default: 1 / every instance)
    minFailedInstances: int | None = Field(1, ge=-1)
    minSucceededInstances: int | None = Field(None, ge=-1)


class V2ContainerOptions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # OpenPAI passes unknown options through
    shmMB: int = Field(64, ge=0)
    infiniband: bool = False


class V2Resources(_Wire):
    cpu: int = Field(ge=1)
    memoryMB: int = Field(ge=100)
    gpu: int = Field(ge=0)
    ports: dict[V2PortLabel, int] = Field(default_factory=dict)


class V2TaskRole(_Wire):
    protocolVersion: ProtocolVersion | None = None
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
    preCommands: list[str] = Field(default_factory=list, min_length=1)
    postCommands: list[str] = Field(default_factory=list, min_length=1)


class V2Deployment(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # OpenPAI's deployment schema is open
    name: V2JobName
    taskRoles: dict[V2RoleName, V2RoleCommands] = Field(min_length=1)
    protocolVersion: ProtocolVersion | None = None
    contributor: str | None = None
    description: str | None = None


class V2Defaults(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)  # OpenPAI's defaults schema is open
    virtualCluster: str | None = "default"  # (null: the default)
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
    deployments: list[V2Deployment] = Field(default_factory=list, min_length=1)
    defaults: V2Defaults = Field(default_factory=V2Defaults)
    extras: dict[str, Any] = Field(default_factory=dict)


def _check_prerequisite(p: dict[str, Any], path: str) -> list[Problem]:
    """OpenPAI's per-type rules: an image needs a uri string and takes no other fields; data uris are a list of
    strings, a script's or output's uri a string (each optional: a plugin may supply it)."""
    kind, out = p.get("type"), []
    uri = p.get("uri")
    version = p.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, (str, int, float))):
        out.append(Problem(f"{path}.version", "must be a string or a number"))
    if kind == "dockerimage":
        allowed = {"name", "type", "uri", "auth", *PREREQ_BASE}
        out += [Problem(f"{path}.{k}", "is not a known field of a dockerimage prerequisite")
                for k in p if k not in allowed]
        if not isinstance(uri, str) or not uri.strip():
            out.append(Problem(f"{path}.uri", "is required: the image to run, e.g. python:3.11"))
        auth = p.get("auth")
        if auth is not None:
            if not isinstance(auth, dict):
                out.append(Problem(f"{path}.auth", "must be a mapping of username, password, registryuri"))
            else:
                out += [Problem(f"{path}.auth.{k}", "must be a string") for k in ("username", "password", "registryuri")
                        if k in auth and not isinstance(auth[k], str)]
        return out
    if kind == "data" and "uri" in p and (not isinstance(uri, list) or not all(isinstance(u, str) for u in uri)):
        out.append(Problem(f"{path}.uri", "must be a list of strings"))
    elif kind in ("script", "output") and "uri" in p and not isinstance(uri, str):
        out.append(Problem(f"{path}.uri", "must be a string"))
    if "plugin" in p and not isinstance(p["plugin"], str):
        out.append(Problem(f"{path}.plugin", "must be a string"))
    require = p.get("require")
    if "require" in p and (not isinstance(require, list) or not all(isinstance(r, str) for r in require)):
        out.append(Problem(f"{path}.require", "must be a list of strings"))
    return out


def _null_problems(doc: dict[str, Any]) -> list[Problem]:
    """OpenPAI types these fields without null; our wire models default them, so an explicit null is caught here."""
    def check(item: Any, path: str, keys: tuple[str, ...]) -> list[Problem]:
        if not isinstance(item, dict):
            return []
        return [Problem(f"{path}{'.' if path else ''}{k}", "must not be null") for k in keys
                if k in item and item[k] is None]

    out = check(doc, "", PREREQ_BASE)
    for key in ("prerequisites", "deployments"):
        if isinstance(doc.get(key), list):
            for i, item in enumerate(doc[key]):
                out += check(item, f"{key}[{i}]", PREREQ_BASE)
    if isinstance(doc.get("taskRoles"), dict):
        for name, role in doc["taskRoles"].items():
            out += check(role, f"taskRoles.{name}", ("protocolVersion",))
    out += check(doc.get("defaults"), "defaults", ("deployment",))
    return out


def _cross_checks(doc: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = _null_problems(doc)
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
            if isinstance(res, dict) and res.get("ports") == {}:
                out.append(Problem(f"{path}.resourcePerInstance.ports", "must name at least one port (or be left out)"))
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


def _min_failed(value: int | None) -> int | None:
    """OpenPAI (k8s.js): null or 0 is the default 1; -1 never fails the job (the model's None)."""
    return None if value == -1 else (value or 1)


def _min_succeeded(value: int | None) -> int | None:
    """null, 0 and -1 all end the job when every task has ended (the model's None)."""
    return value if value and value > 0 else None


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
        rest = {k: v for k, v in p.model_dump(exclude_unset=True).items() if k not in ("name", "type")}
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
            commands=list(r.commands), min_failed=_min_failed(r.completion.minFailedInstances),
            min_succeeded=_min_succeeded(r.completion.minSucceededInstances), task_retry_count=r.taskRetryCount,
            docker_image=r.dockerImage, data=r.data, output=r.output, script=r.script,
            prerequisites=list(r.prerequisites),
        ))
    deployments = [Deployment(name=d.name, task_roles={
        k: RoleCommands(pre_commands=v.preCommands, post_commands=v.postCommands) for k, v in d.taskRoles.items()})
        for d in wire.deployments]
    job = Job(
        name=wire.name, task_roles=roles, prerequisites=prereqs,
        virtual_cluster="default" if wire.defaults.virtualCluster is None else wire.defaults.virtualCluster,
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
        out += [Problem(format_path(["task_roles", i, "ports", j, "label"]),
                        f"{p.label!r} is valid in v1 but v2 port labels must match {V2_PORT_LABEL}")
                for j, p in enumerate(r.ports) if not re.match(V2_PORT_LABEL, p.label)]
    for i, d in enumerate(job.deployments):
        if not re.match(V2_JOB_NAME, d.name):
            out.append(Problem(format_path(["deployments", i, "name"]),
                               f"{d.name!r}: v2 deployment names allow only letters, digits, '_' and '-'"))
    for i, p in enumerate(job.prerequisites):
        if not re.match(V2_JOB_NAME, p.name) or len(p.name) > 255:
            out.append(Problem(format_path(["prerequisites", i, "name"]),
                               f"{p.name!r}: v2 prerequisite names allow only letters, digits, '_' and '-'"))
    if out:
        raise ConversionError(out, f"{job.name} cannot be written as v2")
    first_image = next(p.name for p in job.prerequisites if p.type == "dockerimage")
    doc: dict[str, Any] = {"protocolVersion": 2, "name": job.name, "type": "job"}
    for field in ("version", "contributor", "description"):
        if getattr(job, field) is not None:
            doc[field] = getattr(job, field)
    doc["prerequisites"] = [
        {"name": p.name, "type": p.type, **({"uri": p.uri} if p.uri not in (None, []) else {}),
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
            # the schema types both as integers (no null); leaving minSucceededInstances out means every instance
            "completion": {"minFailedInstances": -1 if r.min_failed is None else r.min_failed,
                           **({"minSucceededInstances": r.min_succeeded} if r.min_succeeded is not None else {})},
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
    deployments = _deployments_v2(job)
    if deployments:
        doc["deployments"] = deployments
    defaults: dict[str, Any] = {}
    if job.virtual_cluster != "default":
        defaults["virtualCluster"] = job.virtual_cluster
    if job.default_deployment is not None and any(d["name"] == job.default_deployment for d in deployments):
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


def _deployments_v2(job: Job) -> list[dict[str, Any]]:
    """OpenPAI refuses empty command lists and deployments without roles; both mean "nothing to add", so they are
    left out (and so is a default deployment that adds nothing)."""
    out = []
    for d in job.deployments:
        roles = {k: {**({"preCommands": list(v.pre_commands)} if v.pre_commands else {}),
                     **({"postCommands": list(v.post_commands)} if v.post_commands else {})}
                 for k, v in d.task_roles.items()}
        if roles:
            out.append({"name": d.name, "taskRoles": roles})
    return out
