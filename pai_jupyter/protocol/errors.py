"""The one error a bad job document raises: every problem, each with its field path and the rule broken."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

__all__ = [
    "ConversionError",
    "JobValidationError",
    "Problem",
    "format_path",
    "join_path",
    "merge",
    "problems_from_pydantic",
    "to_wire",
    "type_name",
]


@dataclass(frozen=True)
class Problem:
    """One broken rule: where (``taskRoles[0].memoryMB``) and what, in plain English."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


class JobValidationError(ValueError):
    """A job document that cannot be accepted. ``problems`` lists every issue found, not just the first."""

    def __init__(self, problems: Sequence[Problem], source: str | None = None):
        self.problems: list[Problem] = list(problems) or [Problem("", "invalid job")]
        self.source = source
        head = f"{source}: " if source else ""
        count = len(self.problems)
        lines = [f"{head}invalid job ({count} problem{'s' if count != 1 else ''})"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))

    def to_dict(self) -> dict[str, Any]:
        return {"problems": [p.to_dict() for p in self.problems]}


class ConversionError(JobValidationError):
    """A valid job that the other protocol version cannot express; each problem names the field."""


# Friendly wording for the regular expressions the protocol uses, keyed by the pattern itself.
PATTERN_RULES = {
    r"^[A-Za-z0-9\-._~]+$": "job names may use only letters, digits, '-', '.', '_' and '~'",
    r"^[a-zA-Z0-9_-]+$": "job names may use only letters, digits, '_' and '-'",
    r"^[A-Za-z0-9._~]+$": "names must match ^[A-Za-z0-9._~]+$ (letters, digits, '.', '_', '~')",
    r"^[a-zA-Z_][a-zA-Z0-9_]*$": (
        "role names must match ^[a-zA-Z_][a-zA-Z0-9_]*$ (start with a letter or '_', then letters, digits, '_')"
    ),
    r"^[A-Za-z_][A-Za-z0-9_]*$": "port labels must match ^[A-Za-z_][A-Za-z0-9_]*$ (a letter or '_', then letters, "
    "digits, '_')",
}


def join_path(head: str, tail: str) -> str:
    """``task_roles[0]`` + ``memory_mb`` -> ``task_roles[0].memory_mb``; ``ports`` + ``[1]`` -> ``ports[1]``."""
    if not head or not tail:
        return head or tail
    return head + tail if tail.startswith("[") else f"{head}.{tail}"


def format_path(loc: Iterable[Any]) -> str:
    """Turn a location tuple into ``taskRoles[0].memoryMB`` / ``taskRoles.worker.instances``."""
    out = ""
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_name(value: Any) -> str:
    """'an integer', 'a list', ... for messages."""
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)


def _message(err: ErrorDetails) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err["input"]
    got = f", got {type_name(value)}"
    simple = {
        "missing": "is required",
        "extra_forbidden": "is not a known field (unknown keys are rejected, as OpenPAI does)",
        "int_type": "must be an integer" + got,
        "int_from_float": "must be an integer" + got,
        "int_parsing": "must be an integer" + got,
        "string_type": "must be a string" + got,
        "bool_type": "must be true or false" + got,
        "bool_parsing": "must be true or false" + got,
        "dict_type": "must be a mapping (key: value)" + got,
        "model_type": "must be a mapping (key: value)" + got,
        "model_attributes_type": "must be a mapping (key: value)" + got,
        "list_type": "must be a list" + got,
        "float_type": "must be a number" + got,
        "none_required": "must be null",
        "string_unicode": "must be valid Unicode text",
    }
    if kind in simple:
        return simple[kind]
    if kind == "greater_than_equal":
        return f"{_short(value)} is below the minimum {ctx.get('ge')}"
    if kind == "greater_than":
        return f"{_short(value)} must be greater than {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"{_short(value)} is above the maximum {ctx.get('le')}"
    if kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern", "")
        rule = PATTERN_RULES.get(pattern, "must match " + pattern)
        # a bad mapping key is already named by the path (``taskRoles.1worker``): do not repeat it
        return rule if err["loc"] and err["loc"][-1] == "[key]" else f"{_short(value)}: {rule}"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters (got {len(value)})"
    if kind == "string_too_short":
        n = ctx.get("min_length")
        return "must not be empty" if n == 1 else f"must be at least {n} characters"
    if kind == "too_short":
        n = ctx.get("min_length")
        return f"must have at least {n} item{'s' if n != 1 else ''}"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} items"
    if kind in ("literal_error", "enum"):
        return f"{_short(value)} must be {ctx.get('expected')}"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", err["msg"]))
    return err["msg"] or "is invalid"


def problems_from_pydantic(
    exc: ValidationError, prefix: Sequence[Any] = (), *, model: type[BaseModel] | None = None
) -> list[Problem]:
    """Translate pydantic's errors into plain-English problems with wire-format field paths.

    A validator that raised JobValidationError (a model's cross-field rules, a nested builder) contributes each
    of its problems, with its path put under the location where it was raised. Given the ``model`` validated, an
    unknown field is told the closest known field of the mapping it is in ("did you mean 'commands'?").
    """
    out: list[Problem] = []
    for e in exc.errors(include_url=False):
        path = format_path([*prefix, *e["loc"]])
        inner = (e.get("ctx") or {}).get("error")
        if isinstance(inner, JobValidationError):
            out += [Problem(join_path(path, p.path), p.message) for p in inner.problems]
            continue
        message = _message(e)
        meant = _closest(e["loc"], model) if e["type"] == "extra_forbidden" and model is not None else None
        out.append(Problem(path, f"{message}; did you mean {meant!r}?" if meant else message))
    return out


def _closest(loc: Sequence[Any], model: type[BaseModel]) -> str | None:
    """The known field of the mapping at ``loc[:-1]`` in ``model`` most like the unknown key ``loc[-1]`` (any
    case: 'jobname' is 'jobName'), as a document spells it; None when none is close."""
    if not loc or not isinstance(loc[-1], str):
        return None
    node: Any = model
    for part in loc[:-1]:
        node = _inside(node, part)
    if not (isinstance(node, type) and issubclass(node, BaseModel)):
        return None
    known = {(f.alias or name).lower(): f.alias or name for name, f in node.model_fields.items()}
    found = difflib.get_close_matches(loc[-1].lower(), list(known), n=1, cutoff=0.6)
    return known[found[0]] if found else None


def _inside(node: Any, part: Any) -> Any:
    """The type at ``part`` of a value of type ``node``: a model's field, a list's item, a mapping's value (an
    Annotated or Optional type looked through); None where the path leaves what the types say."""
    origin, args = get_origin(node), get_args(node)
    if origin is Annotated:
        return _inside(args[0], part)
    if origin in (Union, types.UnionType):
        return next((t for t in (_inside(a, part) for a in args if a is not type(None)) if t is not None), None)
    if isinstance(node, type) and issubclass(node, BaseModel) and isinstance(part, str):
        field = node.model_fields.get(part) or next((f for f in node.model_fields.values() if f.alias == part), None)
        return field.annotation if field else None
    if origin in (list, tuple) and isinstance(part, int) and args:
        return args[0]
    if origin is dict and isinstance(part, str) and len(args) == 2:
        return args[1]
    return None


def to_wire(problems: Iterable[Problem], paths: dict[str, str]) -> list[Problem]:
    """Problems found on a job's model (``task_roles[0].shm_mb``) at the wire document's paths
    (``taskRoles.worker.extraContainerOptions.shmMB``). ``paths`` maps model paths to wire paths; a problem takes
    the longest mapped prefix of its path, and keeps the rest as it is (``extras.<key>``)."""
    return [Problem(wire_path(p.path, paths), p.message) for p in problems]


def wire_path(path: str, paths: dict[str, str]) -> str:
    probe = path
    while probe not in paths:
        cut = max(probe.rfind("."), probe.rfind("["))
        if cut <= 0:
            return path
        probe = probe[:cut]
    return paths[probe] + path[len(probe) :]


def merge(schema: list[Problem], rules: list[Problem]) -> list[Problem]:
    """A document's schema problems, then the rule problems that say something new: a field the schema already
    refused is not judged again (a missing image is "required", not also "blank"), and no problem is listed twice."""
    taken = {p.path for p in schema}
    return list(dict.fromkeys([*schema, *(p for p in rules if p.path not in taken)]))
