"""What OpenPAI itself accepts, as test oracles: the official protocol schema file, and the REST server's
submit-time validator (the JSON schema of ``config/v2/protocol.js`` with its ``$merge`` of the base schema
resolved, plus the cross-field checks of ``middlewares/v2/protocol.js``). Facts transcribed from OpenPAI (MIT)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

DATA = Path(__file__).resolve().parent.parent / "data" / "openpai"
NAME = {"type": "string", "pattern": "^[a-zA-Z0-9_-]+$", "maxLength": 255}
IDENT = "^[a-zA-Z_][a-zA-Z0-9_]*$"
BASE = {
    "protocolVersion": {"enum": ["2", 2]},
    "name": NAME,
    "version": {"type": ["string", "number"]},
    "contributor": {"type": "string"},
    "description": {"type": "string"},
}
STRINGS = {"type": "array", "items": {"type": "string"}}


def _prereq(props: dict[str, Any], required: list[str], additional: bool) -> dict[str, Any]:
    """ajv-merge-patch: the base schema's properties merged with the type's own."""
    return {"type": "object", "properties": {**BASE, **props}, "required": required, "additionalProperties": additional}


SERVER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **BASE,
        "type": {"type": "string", "enum": ["job"]},
        "prerequisites": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "oneOf": [
                    _prereq(
                        {
                            "type": {"type": "string", "enum": ["script", "output"]},
                            "plugin": {"type": "string"},
                            "require": STRINGS,
                            "uri": {"type": "string"},
                        },
                        ["name", "type"],
                        True,
                    ),
                    _prereq(
                        {
                            "type": {"type": "string", "enum": ["data"]},
                            "plugin": {"type": "string"},
                            "require": STRINGS,
                            "uri": STRINGS,
                        },
                        ["name", "type"],
                        True,
                    ),
                    _prereq(
                        {
                            "type": {"type": "string", "enum": ["dockerimage"]},
                            "auth": {
                                "type": "object",
                                "properties": {k: {"type": "string"} for k in ("username", "password", "registryuri")},
                            },
                            "uri": {"type": "string"},
                        },
                        ["name", "type", "uri"],
                        False,
                    ),
                ],
            },
        },
        "parameters": {"type": "object"},
        "secrets": {"type": "object"},
        "jobRetryCount": {"type": "integer", "minimum": 0},
        "taskRoles": {
            "patternProperties": {
                IDENT: {
                    "type": "object",
                    "properties": {
                        "protocolVersion": BASE["protocolVersion"],
                        "instances": {"type": "integer", "minimum": 1},
                        "completion": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "minFailedInstances": {"type": ["integer", "null"]},
                                "minSucceededInstances": {"type": ["integer", "null"]},
                            },
                        },
                        "taskRetryCount": {"type": "integer"},
                        "prerequisites": STRINGS,
                        "dockerImage": {"type": "string"},
                        "data": {"type": "string"},
                        "output": {"type": "string"},
                        "script": {"type": "string"},
                        # (protocol.js puts its additionalProperties: false inside properties: other options pass)
                        "extraContainerOptions": {"type": "object", "properties": {"shmMB": {"type": "integer"}}},
                        "resourcePerInstance": {
                            "type": "object",
                            "required": ["cpu", "memoryMB", "gpu"],
                            "additionalProperties": False,
                            "properties": {
                                "cpu": {"type": "integer"},
                                "memoryMB": {"type": "integer"},
                                "gpu": {"type": "integer"},
                                "ports": {
                                    "patternProperties": {IDENT: {"type": "integer"}},
                                    "minProperties": 1,
                                    "additionalProperties": False,
                                },
                            },
                        },
                        "commands": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    },
                    "required": ["dockerImage", "resourcePerInstance", "commands"],
                    "additionalProperties": False,
                }
            },
            "minProperties": 1,
            "additionalProperties": False,
        },
        "deployments": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "taskRoles"],
                "properties": {
                    "protocolVersion": BASE["protocolVersion"],
                    "name": NAME,
                    "taskRoles": {
                        "patternProperties": {
                            IDENT: {
                                "type": "object",
                                "additionalProperties": False,
                                "properties": {
                                    "preCommands": {**STRINGS, "minItems": 1},
                                    "postCommands": {**STRINGS, "minItems": 1},
                                },
                            }
                        },
                        "minProperties": 1,
                        "additionalProperties": False,
                    },
                },
            },
        },
        "defaults": {"type": "object", "properties": {"deployment": {"type": "string"}}},
        "extras": {"type": "object"},
    },
    "required": ["protocolVersion", "name", "type", "taskRoles"],
    "additionalProperties": False,
}


def _official() -> dict[str, Any]:
    spec = yaml.safe_load((DATA / "protocol-schema.yaml").read_text())
    return {"$ref": "#/components/schemas/JobProtocol", "components": spec["components"]}


OFFICIAL_SCHEMA = _official()
_server = jsonschema.Draft7Validator(SERVER_SCHEMA)
_official_validator = jsonschema.Draft7Validator(OFFICIAL_SCHEMA)


def server_problems(doc: Any) -> list[str]:
    """Why OpenPAI's REST server refuses ``doc`` at submit (empty when it accepts it)."""
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in _server.iter_errors(doc)]
    if errors:
        return errors
    try:
        return _cross_problems(doc)
    except (TypeError, AttributeError, KeyError) as exc:  # e.g. taskRoles: null passes the schema, then the
        return [f"the server fails on it ({exc!r})"]  # middleware's Object.keys(null) throws (a 500)


def _cross_problems(doc: dict[str, Any]) -> list[str]:
    seen: dict[str, set[str]] = {t: set() for t in ("script", "output", "data", "dockerimage")}
    names: set[str] = set()
    for item in doc.get("prerequisites", []):
        if item["name"] in seen[item["type"]]:
            return [f"Duplicate {item['type']} prerequisites {item['name']}."]
        seen[item["type"]].add(item["name"])
        names.add(item["name"])
    deployments: set[str] = set()
    for item in doc.get("deployments", []):
        if item["name"] in deployments:
            return [f"Duplicate deployments {item['name']}."]
        deployments.add(item["name"])
    for role in doc["taskRoles"].values():
        missing = [p for p in role.get("prerequisites", []) if p not in names]
        missing += [
            role[f] for f in ("script", "output", "data", "dockerImage") if f in role and role[f] not in seen[f.lower()]
        ]
        if missing:
            return [f"Prerequisite {missing[0]} does not exist."]
    if "deployment" in doc.get("defaults", {}) and doc["defaults"]["deployment"] not in deployments:
        return [f"Default deployment {doc['defaults']['deployment']} does not exist."]
    return []


def official_problems(doc: Any) -> list[str]:
    """Why the official protocol schema file refuses ``doc`` (empty when it validates)."""
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in _official_validator.iter_errors(copy.deepcopy(doc))
    ]
