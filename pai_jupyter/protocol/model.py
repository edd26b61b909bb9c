"""The one typed job model that v1 JSON, v2 YAML and Python builders all become.

Semantics follow OpenPAI protocol v2 (a v1 job converts into it the way OpenPAI's converter does);
names are Pythonic. ``Job(name=..., image=..., task_roles=[TaskRole(name="main", command="...")])``.
A Job reads and writes its documents through ``v1.py`` and ``v2.py``, which see it only as a type (the readers
hand back plain data, ``wire.Wire``), so the imports go one way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from .checks import V1_EXTRAS_KEY, job_problems, role_problems
from .errors import JobValidationError, Problem, merge, problems_from_pydantic, to_wire, type_name
from .parse import MAX_DEPTH, MAX_DOCUMENT_BYTES, TOO_DEEP, dump_yaml, load_document, nesting_depth
from .rules import (
    DEFAULT_IMAGE_PREREQ,
    MAX_ROLE_NAME,
    MAX_RUN_TIME_KEY,
    PORT_LABEL,
    V1_JOB_NAME,
    V1_ROLE_NAME,
    Count,
    MemoryMB,
    NonNegative,
    Version,
)
from .v1 import job_to_v1, read_v1
from .v2 import job_to_v2, read_v2
from .wire import Wire, detect_version

__all__ = [
    "DEFAULT_IMAGE_PREREQ",
    "DEFAULT_MEMORY_MB",
    "DEFAULT_SHM_MB",
    "V1_EXTRAS_KEY",
    "Deployment",
    "Job",
    "Port",
    "Prerequisite",
    "RoleCommands",
    "TaskRole",
    "rule_problems",
]

DEFAULT_MEMORY_MB = 1024
DEFAULT_SHM_MB = 64


class _Model(BaseModel):
    """Builders raise JobValidationError (field paths, plain English) rather than pydantic's error."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise JobValidationError(problems_from_pydantic(exc, model=type(self))) from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise JobValidationError(problems_from_pydantic(exc)) from None


class Port(_Model):
    label: str = Field(pattern=PORT_LABEL)
    count: Count = 1
    begin_at: NonNegative = Field(0, description="first port wanted; 0 = any free port (v1 beginAt)")


class Prerequisite(_Model):
    """A v2 prerequisite: the docker image, or the data / script / output a role refers to. What each type requires
    is checked by the Job that holds it (``checks.prerequisite_problems``)."""

    name: str = Field(min_length=1)
    type: Literal["dockerimage", "data", "script", "output"]
    uri: str | list[str] | None = None
    auth: dict[str, Any] | None = None
    options: dict[str, Any] = Field(default_factory=dict, description="other keys: plugin, require, callbacks ...")

    @field_validator("uri", mode="before")
    @classmethod
    def _uri_shape(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(u, str) for u in value):
            return value
        raise ValueError(f"must be a string or a list of strings, got {type_name(value)}")


class RoleCommands(_Model):
    pre_commands: list[str] = Field(default_factory=list)
    post_commands: list[str] = Field(default_factory=list)


class Deployment(_Model):
    name: str = Field(min_length=1)
    task_roles: dict[str, RoleCommands] = Field(default_factory=dict)


class TaskRole(_Model):
    """One task role: ``instances`` identical tasks, each with these resources and commands."""

    name: str = Field(pattern=V1_ROLE_NAME, max_length=MAX_ROLE_NAME)
    instances: Count = 1
    cpu: Count = 1
    memory_mb: MemoryMB = DEFAULT_MEMORY_MB
    shm_mb: NonNegative = DEFAULT_SHM_MB
    gpu: NonNegative = 0
    ports: list[Port] = Field(default_factory=list)
    commands: list[str] = Field(min_length=1)
    min_failed: Count | None = Field(1, description="failed tasks that fail the job; None = never")
    min_succeeded: Count | None = Field(None, description="succeeded tasks that succeed the job; None = all")
    task_retry_count: NonNegative = 0
    docker_image: str | None = Field(None, description="name of a dockerimage prerequisite; None = the job's")
    data: str | None = None
    output: str | None = None
    script: str | None = None
    prerequisites: list[str] = Field(default_factory=list)
    extra_container_options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _command_shortcut(cls, data: Any) -> Any:
        if isinstance(data, dict) and "command" in data:
            data = dict(data)
            command = data.pop("command")
            if "commands" in data:
                raise ValueError("give either command or commands, not both")
            data["commands"] = [command] if isinstance(command, str) else command
        return data

    @model_validator(mode="after")
    def _check(self) -> TaskRole:
        problems = role_problems(self.model_dump())
        if problems:
            raise JobValidationError(problems)
        return self

    @property
    def command(self) -> str:
        """The commands as one shell script (what the task runs, before deployment wrapping)."""
        return "\n".join(c.strip() for c in self.commands if c.strip())


class Job(_Model):
    """A whole job. ``image=`` adds a dockerimage prerequisite that every role uses by default."""

    name: str = Field(pattern=V1_JOB_NAME, max_length=255)
    task_roles: list[TaskRole] = Field(min_length=1)
    prerequisites: list[Prerequisite] = Field(default_factory=list)
    virtual_cluster: str = "default"
    retry_count: NonNegative = 0
    parameters: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, Any] = Field(default_factory=dict)
    extras: dict[str, Any] = Field(default_factory=dict)
    deployments: list[Deployment] = Field(default_factory=list)
    default_deployment: str | None = None
    description: str | None = None
    version: Version = None
    contributor: str | None = None
    gpu_type: str | None = None
    auth_file: str | None = None

    _source_text: str | None = PrivateAttr(None)
    _source_format: Literal["v1", "v2", "python"] = PrivateAttr("python")

    @model_validator(mode="before")
    @classmethod
    def _image_shortcut(cls, data: Any) -> Any:
        if isinstance(data, dict) and "image" in data:
            data = dict(data)
            image = data.pop("image")
            prereqs = list(data.get("prerequisites") or [])
            prereqs.insert(0, {"name": DEFAULT_IMAGE_PREREQ, "type": "dockerimage", "uri": image})
            data["prerequisites"] = prereqs
        return data

    @model_validator(mode="after")
    def _check(self) -> Job:
        problems = job_problems(self.model_dump(), roles=False)  # each TaskRole has checked itself
        if problems:
            raise JobValidationError(problems)
        return self

    def __eq__(self, other: object) -> bool:
        """Equal when the jobs mean the same; where they came from (text, format) does not count, nor whether
        a role names the job's first image or leaves it implied."""
        return isinstance(other, Job) and self._meaning() == other._meaning()

    def _meaning(self) -> dict[str, Any]:
        dump = self.model_dump()
        first = next((p.name for p in self.prerequisites if p.type == "dockerimage"), None)
        for role in dump["task_roles"]:
            role["docker_image"] = role["docker_image"] or first
        return dump

    __hash__ = None  # type: ignore[assignment]

    # ---- convenience views -------------------------------------------------------------------------------
    @property
    def image(self) -> str | None:
        """The image the first role runs (what a v1 job calls ``image``)."""
        return self.image_for(self.task_roles[0]) if self.task_roles else None

    def image_for(self, role: TaskRole) -> str | None:
        wanted = role.docker_image
        for p in self.prerequisites:
            if p.type == "dockerimage" and (wanted is None or p.name == wanted):
                return p.uri if isinstance(p.uri, str) else None
        return None

    def role(self, name: str) -> TaskRole:
        for r in self.task_roles:
            if r.name == name:
                return r
        raise KeyError(name)

    def prerequisite(self, kind: str, name: str | None) -> Prerequisite | None:
        return next((p for p in self.prerequisites if p.type == kind and p.name == name), None)

    def role_commands(self, role: TaskRole) -> RoleCommands:
        """The default deployment's pre/post commands for a role (empty when none applies)."""
        dep = next((d for d in self.deployments if d.name == self.default_deployment), None)
        return dep.task_roles.get(role.name, RoleCommands()) if dep else RoleCommands()

    @property
    def gang_allocation(self) -> bool:
        return self.extras.get("gangAllocation", True) is not False

    @property
    def max_run_time_minutes(self) -> int | None:
        return self.extras.get(MAX_RUN_TIME_KEY)

    @property
    def runtime_plugins(self) -> list[dict[str, Any]]:
        return list(self.extras.get("com.microsoft.pai.runtimeplugin") or [])

    @property
    def total_tasks(self) -> int:
        return sum(r.instances for r in self.task_roles)

    @property
    def source_text(self) -> str | None:
        """The document exactly as it was submitted (kept verbatim for clone)."""
        return self._source_text

    @property
    def source_format(self) -> str:
        return self._source_format

    def summary(self) -> str:
        """One line for the job, one per role: tasks and total CPU / GPU / memory."""
        cpu = sum(r.cpu * r.instances for r in self.task_roles)
        gpu = sum(r.gpu * r.instances for r in self.task_roles)
        mem = sum(r.memory_mb * r.instances for r in self.task_roles)
        nroles = len(self.task_roles)
        lines = [
            f"{self.name}: {nroles} role{'s' * (nroles != 1)}, {self.total_tasks} "
            f"task{'s' * (self.total_tasks != 1)}, CPU {cpu}, GPU {gpu}, memory {_mem(mem)}"
            f" (image {self.image})"
        ]
        for r in self.task_roles:
            lines.append(
                f"  {r.name}: {r.instances} x (CPU {r.cpu}, GPU {r.gpu}, memory {_mem(r.memory_mb)}, "
                f"shm {r.shm_mb} MB{_ports(r)})"
            )
        return "\n".join(lines)

    # ---- I/O ------------------------------------------------------------------------------------------------
    @classmethod
    def from_text(cls, text: str | bytes, *, source: str | None = None) -> Job:
        """Parse and validate; keeps the text verbatim on the job (``job.source_text``) for clone."""
        job = cls.from_dict(load_document(text, source=source), source=source)
        job._source_text = text.decode("utf-8-sig") if isinstance(text, bytes) else text
        return job

    @classmethod
    def from_file(cls, path: str | Path) -> Job:
        p = Path(path)
        try:
            with p.open("rb") as f:  # bounded: a path like /dev/zero must not read forever
                data = f.read(MAX_DOCUMENT_BYTES + 1)
        except OSError as exc:
            raise JobValidationError([Problem("", f"cannot read the file: {exc.strerror or exc}")], str(p)) from None
        if len(data) > MAX_DOCUMENT_BYTES:
            raise JobValidationError(
                [Problem("", f"the file is larger than the limit of {MAX_DOCUMENT_BYTES} bytes")], str(p)
            )
        return cls.from_text(data, source=str(p))

    @classmethod
    def from_dict(cls, doc: dict[str, Any], *, source: str | None = None) -> Job:
        """A v1 or v2 document (by ``detect_version``) as a Job: every problem at once, or the Job."""
        if not isinstance(doc, dict):
            raise JobValidationError([Problem("", "a job must be a mapping of fields")], source)
        if nesting_depth(doc) > MAX_DEPTH:
            raise JobValidationError([Problem("", TOO_DEEP)], source)
        try:
            return job_from_wire(read_v2(doc) if detect_version(doc) == "v2" else read_v1(doc), source=source)
        except RecursionError:
            raise JobValidationError([Problem("", TOO_DEEP)], source) from None

    def to_v1(self) -> dict[str, Any]:
        return job_to_v1(self)

    def to_v2(self) -> dict[str, Any]:
        return job_to_v2(self)

    def to_yaml(self) -> str:
        return dump_yaml(self.to_v2())


def rule_problems(data: dict[str, Any]) -> list[Problem]:
    """The model's rules between fields applied to plain data shaped like ``Job.model_dump()`` that may not be a
    valid job yet (a wire document mid-translation), so that these problems come with the schema's."""
    return job_problems(data)


def job_from_wire(wire: Wire, *, source: str | None) -> Job:
    """A wire reader's last step, the same for v1 and v2: every problem at once (the document's shape from its
    schema, the rest from the model's rules, each at the document's own path), or the Job."""
    data, paths, schema_problems, source_format = wire
    problems = merge(schema_problems, to_wire(rule_problems(data), paths))
    if not problems:
        try:
            job = Job(**data)
        except JobValidationError as exc:  # rules on single fields the schema does not type (nesting depth, ...)
            problems = to_wire(exc.problems, paths)
    if problems:
        raise JobValidationError(problems, source)
    job._source_format = source_format
    return job


def _mem(mb: int) -> str:
    return f"{mb / 1024:.1f} GiB" if mb >= 1024 else f"{mb} MB"


def _ports(role: TaskRole) -> str:
    return (", ports " + ", ".join(f"{p.label} x{p.count}" for p in role.ports)) if role.ports else ""
