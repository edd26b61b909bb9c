"""OpenPAI v2 YAML (protocolVersion 2): reading a document into the model, and writing a job as one.

Reading checks the document's shape (``v2schema.py``) and the few rules only the wire has (explicit nulls, the
carrier of v1 facts), translates each field into the model's, and reports the model's rules at the v2 paths."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .checks import V1_EXTRAS_KEY
from .errors import ConversionError, Problem, format_path, problems_from_pydantic
from .rules import V2_JOB_NAME, V2_PORT_LABEL, V2_ROLE_NAME, is_int
from .v2schema import V2Job
from .wire import Wire

if TYPE_CHECKING:
    from .model import Job, TaskRole  # the writer reads a Job; the reader gives data (wire.py)

PREREQ_BASE = ("protocolVersion", "version", "contributor", "description")
# The model's field -> the v2 path it is read from (and a problem with it is reported at).
V2_JOB_FIELDS = {
    "name": "name",
    "version": "version",
    "contributor": "contributor",
    "description": "description",
    "prerequisites": "prerequisites",
    "parameters": "parameters",
    "secrets": "secrets",
    "retry_count": "jobRetryCount",
    "task_roles": "taskRoles",
    "deployments": "deployments",
    "extras": "extras",
    "virtual_cluster": "defaults.virtualCluster",
    "default_deployment": "defaults.deployment",
}
V2_ROLE_FIELDS = {
    "instances": "instances",
    "commands": "commands",
    "task_retry_count": "taskRetryCount",
    "docker_image": "dockerImage",
    "data": "data",
    "output": "output",
    "script": "script",
    "prerequisites": "prerequisites",
    "cpu": "resourcePerInstance.cpu",
    "memory_mb": "resourcePerInstance.memoryMB",
    "gpu": "resourcePerInstance.gpu",
    "ports": "resourcePerInstance.ports",
    "shm_mb": "extraContainerOptions.shmMB",
    "extra_container_options": "extraContainerOptions",
    "min_failed": "completion.minFailedInstances",
    "min_succeeded": "completion.minSucceededInstances",
}


def _null_problems(doc: dict[str, Any]) -> list[Problem]:
    """OpenPAI types these fields without null; our wire models default them, so an explicit null is caught here
    (the model cannot tell a null from a field left out)."""

    def check(item: Any, path: str, keys: tuple[str, ...]) -> list[Problem]:
        if not isinstance(item, dict):
            return []
        return [
            Problem(f"{path}{'.' if path else ''}{k}", "must not be null")
            for k in keys
            if k in item and item[k] is None
        ]

    out = check(doc, "", PREREQ_BASE)
    if isinstance(doc.get("prerequisites"), list):
        for i, item in enumerate(doc["prerequisites"]):
            # the model reads a null uri / auth as none given; OpenPAI types them without null (a dockerimage's
            # missing uri is the model's "required")
            image = isinstance(item, dict) and item.get("type") == "dockerimage"
            out += check(item, f"prerequisites[{i}]", (*PREREQ_BASE, "auth" if image else "uri"))
    if isinstance(doc.get("deployments"), list):
        for i, item in enumerate(doc["deployments"]):
            out += check(item, f"deployments[{i}]", PREREQ_BASE)
    if isinstance(doc.get("taskRoles"), dict):
        for name, role in doc["taskRoles"].items():
            out += check(role, f"taskRoles.{name}", ("protocolVersion", "data", "output", "script"))
    out += check(doc.get("defaults"), "defaults", ("deployment",))
    return out


def _schema_problems(doc: dict[str, Any]) -> list[Problem]:
    """The document's shape, and the rules only v2 has."""
    out: list[Problem] = []
    try:
        V2Job.model_validate(doc)
    except ValidationError as exc:
        out += problems_from_pydantic(exc, model=V2Job)
    out += _null_problems(doc)
    roles = doc.get("taskRoles")
    for name, role in roles.items() if isinstance(roles, dict) else ():
        res = role.get("resourcePerInstance") if isinstance(role, dict) else None
        if isinstance(res, dict) and res.get("ports") == {}:
            out.append(
                Problem(f"taskRoles.{name}.resourcePerInstance.ports", "must name at least one port (or be left out)")
            )
    extras = doc.get("extras")
    if isinstance(extras, dict) and V1_EXTRAS_KEY in extras:
        out += _check_v1_facts(extras[V1_EXTRAS_KEY], f"extras.{V1_EXTRAS_KEY}")
    return out


def _check_v1_facts(facts: Any, path: str) -> list[Problem]:
    """The carrier of a v1 job's gpuType, authFile and port beginAt (written by job_to_v2)."""
    if not isinstance(facts, dict):
        return [Problem(path, "must be a mapping of gpuType, authFile, portBeginAt")]
    out = [
        Problem(f"{path}.{k}", "is not one of gpuType, authFile, portBeginAt")
        for k in facts
        if k not in ("gpuType", "authFile", "portBeginAt")
    ]
    out += [
        Problem(f"{path}.{k}", "must be a string")
        for k in ("gpuType", "authFile")
        if k in facts and not isinstance(facts[k], str)
    ]
    starts = facts.get("portBeginAt", {})
    if not isinstance(starts, dict) or not all(isinstance(v, dict) for v in starts.values()):
        return [*out, Problem(f"{path}.portBeginAt", "must map each role to {label: first port}")]
    out += [
        Problem(f"{path}.portBeginAt.{role}.{label}", f"{port!r} must be a port number >= 0")
        for role, ports in starts.items()
        for label, port in ports.items()
        if not is_int(port) or port < 0
    ]
    return out


def _min_failed(value: Any) -> Any:
    """OpenPAI (k8s.js): null or 0 is the default 1; -1 never fails the job (the model's None)."""
    return None if value == -1 else (value or 1)


def _min_succeeded(value: Any) -> Any:
    """null, 0 and -1 all end the job when every task has ended (the model's None)."""
    return None if value in (None, 0, -1) else value


def _prerequisite_to_model(raw: Any, path: str, paths: dict[str, str]) -> Any:
    paths[path] = path
    if not isinstance(raw, dict):
        return raw
    paths[f"{path}.options"] = path  # the model keeps OpenPAI's other keys (plugin, require, ...) in options
    options = {k: v for k, v in raw.items() if k not in ("name", "type", "uri")}
    auth = options.pop("auth", None) if raw.get("type") == "dockerimage" else None
    return {"name": raw.get("name"), "type": raw.get("type"), "uri": raw.get("uri"), "auth": auth, "options": options}


_MISSING = object()


def _lookup(item: dict[str, Any], dotted: str) -> Any:
    """``resourcePerInstance.cpu`` in a role as written; _MISSING when it (or a mapping on the way) is not there."""
    for key in dotted.split("."):
        if not isinstance(item, dict) or key not in item:
            return _MISSING
        item = item[key]
    return item


def _role_to_model(name: str, raw: Any, i: int, starts: Any, paths: dict[str, str]) -> Any:
    """One v2 task role as the model's fields (as written, even when wrong: the model's rules judge it)."""
    path = f"taskRoles.{name}"
    paths[f"task_roles[{i}]"] = paths[f"task_roles[{i}].name"] = path
    paths.update({f"task_roles[{i}].{f}": f"{path}.{k}" for f, k in V2_ROLE_FIELDS.items()})
    if not isinstance(raw, dict):
        return raw
    role: dict[str, Any] = {"name": name}
    for field, key in V2_ROLE_FIELDS.items():
        value = _lookup(raw, key)
        if value is not _MISSING:
            role[field] = value
    # the fields v2 writes differently: ports as {label: count}, completion counts with -1 / 0 / null, shmMB
    # beside the other container options (an infiniband of false is the default, as if left out)
    if isinstance(role.get("ports"), dict):
        starts = starts if isinstance(starts, dict) else {}
        for j, label in enumerate(role["ports"]):
            paths[f"task_roles[{i}].ports[{j}]"] = f"{path}.resourcePerInstance.ports.{label}"
            paths[f"task_roles[{i}].ports[{j}].begin_at"] = f"extras.{V1_EXTRAS_KEY}.portBeginAt.{name}.{label}"
        role["ports"] = [{"label": k, "count": v, "begin_at": starts.get(k, 0)} for k, v in role["ports"].items()]
    if "min_failed" in role:
        role["min_failed"] = _min_failed(role["min_failed"])
    if "min_succeeded" in role:
        role["min_succeeded"] = _min_succeeded(role["min_succeeded"])
    if isinstance(role.get("extra_container_options"), dict):
        role["extra_container_options"] = {
            k: v
            for k, v in role["extra_container_options"].items()
            if k != "shmMB" and not (k == "infiniband" and v is False)
        }
    return role


def _deployment_to_model(raw: Any, i: int, paths: dict[str, str]) -> Any:
    paths[f"deployments[{i}]"] = f"deployments[{i}]"
    paths[f"deployments[{i}].task_roles"] = f"deployments[{i}].taskRoles"
    if not isinstance(raw, dict):
        return raw
    roles = raw.get("taskRoles")
    if isinstance(roles, dict):
        for r in roles:
            paths[f"deployments[{i}].task_roles.{r}.pre_commands"] = f"deployments[{i}].taskRoles.{r}.preCommands"
            paths[f"deployments[{i}].task_roles.{r}.post_commands"] = f"deployments[{i}].taskRoles.{r}.postCommands"
        roles = {
            r: {"pre_commands": c.get("preCommands", []), "post_commands": c.get("postCommands", [])}
            if isinstance(c, dict)
            else c
            for r, c in roles.items()
        }
    return {"name": raw.get("name"), "task_roles": roles}


def _to_model(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The model's fields for a v2 document, and the v2 path of each model path."""
    paths = dict(V2_JOB_FIELDS)
    data: dict[str, Any] = {f: doc[k] for f, k in V2_JOB_FIELDS.items() if k in doc}
    extras = data.get("extras")
    facts: Any = {}
    if isinstance(extras, dict):
        data["extras"] = extras = dict(extras)
        facts = extras.pop(V1_EXTRAS_KEY, None)
        facts = facts if isinstance(facts, dict) else {}
    for field, key in (("gpu_type", "gpuType"), ("auth_file", "authFile")):
        data[field] = facts.get(key)
        paths[field] = f"extras.{V1_EXTRAS_KEY}.{key}"
    starts = facts.get("portBeginAt") if isinstance(facts.get("portBeginAt"), dict) else {}
    if isinstance(doc.get("prerequisites"), list):
        data["prerequisites"] = [
            _prerequisite_to_model(p, f"prerequisites[{i}]", paths) for i, p in enumerate(doc["prerequisites"])
        ]
    if isinstance(doc.get("taskRoles"), dict):
        data["task_roles"] = [
            _role_to_model(str(n), r, i, starts.get(n), paths) for i, (n, r) in enumerate(doc["taskRoles"].items())
        ]
    if isinstance(doc.get("deployments"), list):
        data["deployments"] = [_deployment_to_model(d, i, paths) for i, d in enumerate(doc["deployments"])]
    defaults = doc.get("defaults")
    if isinstance(defaults, dict):
        vc = defaults.get("virtualCluster")
        data["virtual_cluster"] = "default" if vc is None else vc
        data["default_deployment"] = defaults.get("deployment")
    return data, paths


def read_v2(doc: dict[str, Any]) -> Wire:
    """A v2 document as the model's data (with the document's path of each field) and the problems its schema
    finds; ``Job.from_dict`` builds the Job."""
    data, paths = _to_model(doc)
    return Wire(data, paths, _schema_problems(doc), "v2")


def job_to_v2(job: Job) -> dict[str, Any]:
    """The v2 document for a job; ConversionError names what v2 cannot express (v1-only name characters)."""
    out = _v2_problems(job)
    if out:
        raise ConversionError(out, f"{job.name} cannot be written as v2")
    first_image = next(p.name for p in job.prerequisites if p.type == "dockerimage")
    doc: dict[str, Any] = {"protocolVersion": 2, "name": job.name, "type": "job"}
    for field in ("version", "contributor", "description"):
        if getattr(job, field) is not None:
            doc[field] = getattr(job, field)
    doc["prerequisites"] = [
        {
            "name": p.name,
            "type": p.type,
            **({"uri": p.uri} if p.uri not in (None, []) else {}),
            **({"auth": p.auth} if p.auth is not None else {}),
            **p.options,
        }
        for p in job.prerequisites
    ]
    if job.parameters:
        doc["parameters"] = dict(job.parameters)
    if job.secrets:
        doc["secrets"] = dict(job.secrets)
    doc["jobRetryCount"] = job.retry_count
    doc["taskRoles"] = {r.name: _role_v2(r, first_image) for r in job.task_roles}
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
    # v2 has no fixed ports: a port's beginAt travels in the v1 facts, by role and label
    begin_at = {
        r.name: starts for r in job.task_roles if (starts := {p.label: p.begin_at for p in r.ports if p.begin_at})
    }
    facts = (("gpuType", job.gpu_type), ("authFile", job.auth_file), ("portBeginAt", begin_at))
    v1_facts = {k: v for k, v in facts if v}
    if v1_facts:
        extras[V1_EXTRAS_KEY] = v1_facts
    if extras:
        doc["extras"] = extras
    return doc


def _v2_problems(job: Job) -> list[Problem]:
    """The names v1 allows and v2 does not (the job's, its roles', ports', deployments', prerequisites')."""
    out: list[Problem] = []
    if not re.match(V2_JOB_NAME, job.name):
        out.append(Problem("name", f"{job.name!r} is valid in v1 but v2 names allow only letters, digits, '_' and '-'"))
    for i, r in enumerate(job.task_roles):
        if not re.match(V2_ROLE_NAME, r.name):
            out.append(
                Problem(
                    format_path(["task_roles", i, "name"]),
                    f"{r.name!r} is valid in v1 but v2 role names must match {V2_ROLE_NAME}",
                )
            )
        out += [
            Problem(
                format_path(["task_roles", i, "ports", j, "label"]),
                f"{p.label!r} is valid in v1 but v2 port labels must match {V2_PORT_LABEL}",
            )
            for j, p in enumerate(r.ports)
            if not re.match(V2_PORT_LABEL, p.label)
        ]
    for i, d in enumerate(job.deployments):
        if not re.match(V2_JOB_NAME, d.name):
            out.append(
                Problem(
                    format_path(["deployments", i, "name"]),
                    f"{d.name!r}: v2 deployment names allow only letters, digits, '_' and '-'",
                )
            )
    for i, p in enumerate(job.prerequisites):
        if not re.match(V2_JOB_NAME, p.name) or len(p.name) > 255:
            out.append(
                Problem(
                    format_path(["prerequisites", i, "name"]),
                    f"{p.name!r}: v2 prerequisite names allow only letters, digits, '_' and '-'",
                )
            )
    return out


def _role_v2(r: TaskRole, first_image: str) -> dict[str, Any]:
    """One task role of the v2 document (its image defaults to the job's first docker image)."""
    role: dict[str, Any] = {
        "instances": r.instances,
        # the schema types both as integers (no null); leaving minSucceededInstances out means every instance
        "completion": {
            "minFailedInstances": -1 if r.min_failed is None else r.min_failed,
            **({"minSucceededInstances": r.min_succeeded} if r.min_succeeded is not None else {}),
        },
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
    role["resourcePerInstance"] = resources
    role["commands"] = list(r.commands)
    return role


def _deployments_v2(job: Job) -> list[dict[str, Any]]:
    """OpenPAI refuses empty command lists and deployments without roles; both mean "nothing to add", so they are
    left out (and so is a default deployment that adds nothing)."""
    out = []
    for d in job.deployments:
        roles = {
            k: {
                **({"preCommands": list(v.pre_commands)} if v.pre_commands else {}),
                **({"postCommands": list(v.post_commands)} if v.post_commands else {}),
            }
            for k, v in d.task_roles.items()
        }
        if roles:
            out.append({"name": d.name, "taskRoles": roles})
    return out
