"""``<% $parameters.x %>`` substitution (OpenPAI's mustache delimiters) and secret masking."""

from __future__ import annotations

import copy
import re
from typing import Any

from .model import Job, TaskRole
from .parse import dump_yaml

MASK = "******"
_TOKEN = re.compile(r"<%\s*\$(?P<scope>[A-Za-z_]\w*)(?P<path>(?:\.[A-Za-z_][\w-]*|\[\d+\])*)\s*%>")
_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]")


def _lookup(scope: Any, path: str) -> tuple[bool, Any]:
    value = scope
    for key, index in _STEP.findall(path):
        if key:
            if not isinstance(value, dict) or key not in value:
                return False, None
            value = value[key]
        else:
            i = int(index)
            if not isinstance(value, list) or i >= len(value):
                return False, None
            value = value[i]
    return True, value


def render(text: str, scopes: dict[str, Any]) -> str:
    """Replace each ``<% $scope.path %>`` found in ``scopes``; anything unknown stays exactly as written."""

    def sub(match: re.Match[str]) -> str:
        scope = scopes.get(match["scope"])
        if scope is None:
            return match.group(0)
        found, value = _lookup(scope, match["path"])
        if not found or isinstance(value, (dict, list)):
            return match.group(0)
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    return _TOKEN.sub(sub, text)


def role_scopes(job: Job, role: TaskRole, *, with_secrets: bool = True) -> dict[str, Any]:
    """The scopes a role's commands see: parameters, secrets, and the role's data / script / output."""
    scopes: dict[str, Any] = {"parameters": job.parameters}
    if with_secrets:
        scopes["secrets"] = job.secrets
    for kind in ("data", "script", "output"):
        p = job.prerequisite(kind, getattr(role, kind))
        if p is not None:
            scopes[kind] = {"uri": p.uri, "name": p.name, **p.options}
    return scopes


def render_commands(job: Job, role: TaskRole) -> str:
    """The shell script a task runs: default deployment pre-commands, the commands, post-commands, rendered."""
    phase = job.role_commands(role)
    lines = [*phase.pre_commands, *role.commands, *phase.post_commands]
    scopes = role_scopes(job, role)
    return "\n".join(render(line.strip(), scopes) for line in lines if line.strip())


def mask_document(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy with the whole ``secrets`` block replaced by ``******``, as OpenPAI's config route answers (its
    protocolSecret.mask), and registry passwords masked too (OpenPAI shows a literal one; we never do)."""
    out = copy.deepcopy(doc)
    if out.get("secrets") not in (None, {}, MASK):
        out["secrets"] = MASK
    for p in out.get("prerequisites") or []:
        if isinstance(p, dict) and isinstance(p.get("auth"), dict) and "password" in p["auth"]:
            p["auth"]["password"] = MASK
    return out


def has_secrets(doc: dict[str, Any]) -> bool:
    return mask_document(doc) != doc


def masked_text(text: str, doc: dict[str, Any]) -> str:
    """The submitted text verbatim when it holds no secret; else the document re-written with secrets masked."""
    if not has_secrets(doc):
        return text
    masked = mask_document(doc)
    if text.lstrip().startswith("{"):
        import json

        return json.dumps(masked, indent=2, ensure_ascii=False)
    return dump_yaml(masked)
