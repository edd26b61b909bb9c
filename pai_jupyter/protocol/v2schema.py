"""The shape of an OpenPAI v2 YAML document (protocolVersion 2): its keys and their JSON types, as OpenPAI's
server types them (``config/v2/protocol.js``). Bounds are the model's own types; rules between fields are the
model's (``checks.py``), applied by ``v2.py`` to the document translated into the model's fields."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .rules import Count, MemoryMB, NonNegative, V2JobName, V2PortLabel, V2RoleName, Version


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
    shmMB: NonNegative = 64


class V2Resources(_Wire):
    cpu: Count
    memoryMB: MemoryMB
    gpu: NonNegative
    ports: dict[V2PortLabel, Count] = Field(default_factory=dict)


class V2TaskRole(_Wire):
    protocolVersion: ProtocolVersion | None = None
    instances: Count = 1
    completion: V2Completion = Field(default_factory=V2Completion)
    taskRetryCount: NonNegative = 0
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
    protocolVersion: ProtocolVersion
    name: V2JobName
    type: Literal["job"]
    version: Version = None
    contributor: str | None = None
    description: str | None = None
    prerequisites: list[V2Prerequisite] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, Any] = Field(default_factory=dict)
    jobRetryCount: NonNegative = 0
    taskRoles: dict[V2RoleName, V2TaskRole] = Field(min_length=1)
    deployments: list[V2Deployment] = Field(default_factory=list, min_length=1)
    defaults: V2Defaults = Field(default_factory=V2Defaults)
    extras: dict[str, Any] = Field(default_factory=dict)
