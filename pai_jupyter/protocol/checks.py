"""The job model's rules between fields, each written once, over the model's plain data (snake_case keys).

The model runs them on itself (``TaskRole`` and ``Job`` validators). The v1 / v2 readers run the same functions on
a wire document translated field by field into this shape, before the model can be built, so these problems are
reported beside the document's schema errors; they then map each model path back to the wire path. The checks
therefore take whatever a document holds: a value of the wrong type is skipped here (the schema reports it).
"""

from __future__ import annotations

from typing import Any, TypeGuard

from .errors import Problem, join_path
from .parse import MAX_DEPTH, nesting_depth
from .rules import check_extras, is_int, version_message, version_ok

# v1-only facts (gpuType, authFile, non-zero port beginAt) travel in this v2 extras key; users may not set it.
V1_EXTRAS_KEY = "pai_jupyter.v1"
CONTAINER_OPTIONS = ("infiniband",)
IMAGE_AUTH_KEYS = ("username", "password", "registryuri")
IMAGE_FIELDS = ("protocolVersion", "version", "contributor", "description")  # OpenPAI's base schema
REFERENCES = ("data", "output", "script")


def _strings(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _list(value: Any) -> list[Any]:
    """A field that should hold a list, or none when it holds something else (the schema reports that)."""
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def prerequisite_problems(p: Any) -> list[Problem]:
    """What OpenPAI requires of each type: an image uri (and only OpenPAI's base fields beside it); data uris are
    a list of strings, a script's or output's uri one string (both optional: a plugin may supply them)."""
    if not isinstance(p, dict):
        return []
    out: list[Problem] = []
    kind, uri, auth = p.get("type"), p.get("uri"), p.get("auth")
    options = _dict(p.get("options"))
    if not version_ok(options.get("version")):
        out.append(Problem("options.version", version_message(options["version"])))
    if kind == "dockerimage":
        out += [
            Problem(f"options.{k}", "is not a known field of a dockerimage prerequisite")
            for k in options
            if k not in IMAGE_FIELDS
        ]
        if not isinstance(uri, str) or not uri.strip():
            out.append(Problem("uri", "is required: the image to run, e.g. python:3.11"))
        if auth is not None and not isinstance(auth, dict):
            out.append(Problem("auth", "must be a mapping of username, password, registryuri"))
        elif isinstance(auth, dict):
            out += [
                Problem(f"auth.{k}", "must be a string")
                for k in IMAGE_AUTH_KEYS
                if k in auth and not isinstance(auth[k], str)
            ]
        return out
    if kind == "data" and uri is not None and not _strings(uri):
        out.append(Problem("uri", "must be a list of strings"))
    elif kind in ("script", "output") and uri is not None and not isinstance(uri, str):
        out.append(Problem("uri", "must be a string"))
    if "plugin" in options and not isinstance(options["plugin"], str):
        out.append(Problem("options.plugin", "must be a string"))
    if "require" in options and not _strings(options["require"]):
        out.append(Problem("options.require", "must be a list of strings"))
    return out


def role_problems(role: Any) -> list[Problem]:
    """Rules within one task role; paths are the role's own fields (``shm_mb``, ``ports[1].label``)."""
    if not isinstance(role, dict):
        return []
    out: list[Problem] = []
    commands = role.get("commands")
    if _strings(commands) and commands and not any(c.strip() for c in commands):
        out.append(Problem("commands", "must hold at least one non-blank command"))
    shm, memory = role.get("shm_mb"), role.get("memory_mb")
    if is_int(shm) and is_int(memory) and shm > memory:
        out.append(Problem("shm_mb", f"{shm} is more than memoryMB {memory}"))
    ports = role.get("ports")
    if isinstance(ports, list):
        # keep positions (None for a non-mapping entry) so index() is the entry's own index
        labels = [p.get("label") if isinstance(p, dict) else None for p in ports]
        out += [
            Problem(f"ports[{j}].label", f"{label!r} is used twice in this role")
            for j, label in enumerate(labels)
            if isinstance(label, str) and labels.index(label) != j
        ]
    count = role.get("instances", 1)
    if is_int(count) and count >= 1:
        for key in ("min_failed", "min_succeeded"):
            value = role.get(key)
            if is_int(value) and value > count:
                out.append(Problem(key, f"{value} is more than the role's {count} task{'s' * (count != 1)}"))
    options = role.get("extra_container_options")
    if isinstance(options, dict):
        if "shmMB" in options:
            out.append(Problem("extra_container_options.shmMB", "shared memory is shm_mb"))
        out += [
            Problem(f"extra_container_options.{k}", "must be true or false")  # others pass, as on OpenPAI
            for k, v in options.items()
            if k in CONTAINER_OPTIONS and not isinstance(v, bool)
        ]
    return out


def _role_references(role: dict[str, Any], declared: dict[str, set[str]]) -> list[Problem]:
    out: list[Problem] = []
    image = role.get("docker_image")
    if isinstance(image, str) and image not in declared["dockerimage"]:
        out.append(Problem("docker_image", f"{image!r} does not name a dockerimage prerequisite"))
    for kind in REFERENCES:
        ref = role.get(kind)
        if isinstance(ref, str) and ref not in declared[kind]:
            out.append(Problem(kind, f"{ref!r} does not name a {kind} prerequisite"))
    refs = role.get("prerequisites")
    if isinstance(refs, list):
        every = set().union(*declared.values())
        out += [
            Problem(f"prerequisites[{j}]", f"{r!r} does not name a prerequisite")
            for j, r in enumerate(refs)
            if isinstance(r, str) and r not in every
        ]
    return out


def job_problems(job: dict[str, Any], *, roles: bool = True) -> list[Problem]:
    """Rules that span fields: unique names, references to prerequisites and deployments, the extras this product
    reads. ``roles=False`` leaves out each role's own rules (the TaskRole model has already run them)."""
    out: list[Problem] = []
    prereqs = _list(job.get("prerequisites"))
    declared: dict[str, set[str]] = {"dockerimage": set(), "data": set(), "script": set(), "output": set()}
    for i, p in enumerate(prereqs):
        if not isinstance(p, dict):
            continue
        kind, name = p.get("type"), p.get("name")
        if isinstance(kind, str) and isinstance(name, str):  # other shapes are reported by the schema
            if name in declared.get(kind, ()):
                out.append(Problem(f"prerequisites[{i}]", f"a {kind} prerequisite named {name!r} is already declared"))
            declared.setdefault(kind, set()).add(name)
        out += [Problem(join_path(f"prerequisites[{i}]", q.path), q.message) for q in prerequisite_problems(p)]
    task_roles = _list(job.get("task_roles"))
    names = [r.get("name") if isinstance(r, dict) else None for r in task_roles]
    for i, role in enumerate(task_roles):
        if not isinstance(role, dict):
            continue
        name = role.get("name")
        if isinstance(name, str) and names.index(name) != i:
            out.append(
                Problem(f"task_roles[{i}].name", f"{name!r} is used by another task role; role names are unique")
            )
        found = _role_references(role, declared) + (role_problems(role) if roles else [])
        out += [Problem(join_path(f"task_roles[{i}]", q.path), q.message) for q in found]
    if not declared["dockerimage"] and any(isinstance(r, dict) and r.get("docker_image") is None for r in task_roles):
        out.append(Problem("image", "a docker image is required"))
    out += _deployment_problems(job, names)
    extras = job.get("extras")
    if isinstance(extras, dict) and V1_EXTRAS_KEY in extras:
        out.append(
            Problem(
                f"extras.{V1_EXTRAS_KEY}",
                "is reserved: pai_jupyter keeps a v1 job's gpuType, authFile and port beginAt there when it writes v2",
            )
        )
    out += [
        Problem(field, f"nests more than {MAX_DEPTH} levels deep")
        for field in ("parameters", "secrets", "extras")
        if nesting_depth(job.get(field)) > MAX_DEPTH
    ]
    out += check_extras(extras, "extras")
    return out


def _deployment_problems(job: dict[str, Any], roles: list[Any]) -> list[Problem]:
    out: list[Problem] = []
    seen: list[str] = []
    deployments = _list(job.get("deployments"))
    for i, d in enumerate(deployments):
        if not isinstance(d, dict):
            continue
        name = d.get("name")
        if name in seen:
            out.append(Problem(f"deployments[{i}].name", f"{name!r} is declared twice"))
        if isinstance(name, str):
            seen.append(name)
        if isinstance(d.get("task_roles"), dict):
            out += [
                Problem(f"deployments[{i}].task_roles.{r}", f"{r!r} is not a task role of this job")
                for r in d["task_roles"]
                if r not in roles
            ]
    default = job.get("default_deployment")
    if isinstance(default, str) and default not in seen:
        out.append(Problem("default_deployment", f"{default!r} is not one of the job's deployments"))
    return out
