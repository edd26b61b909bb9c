"""``<% $parameters.x %>`` substitution (OpenPAI's mustache delimiters) and secret masking."""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any

from .model import Job, TaskRole
from .parse import dump_yaml

MASK = "******"
# a mustache name tag with OpenPAI's delimiters (a section, comment, partial or unescaped tag starts otherwise)
_TAG = re.compile(r"<%\s*(?P<name>[^#^/!>&{=\s](?:(?!%>).)*?)\s*%>")


def _lookup(scopes: dict[str, Any], name: str) -> Any:
    """mustache.js's lookup of a dotted name, ``$parameters.list.0``, in the scopes (keyed without the ``$``);
    None where any step is missing."""
    first, *steps = name.split(".")
    value: Any = scopes.get(first[1:]) if first.startswith("$") else None
    for step in steps:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, (list, str)) and step == "length":
            value = len(value)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value


def _js_number(x: float) -> str:
    """ECMAScript's Number::toString: the shortest digits, exponent form only below 1e-6 or from 1e21."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == int(x) and abs(x) < 2**53:  # beyond, JavaScript writes the shortest digits: 2**60 is 1152921504606847000
        return str(int(x))
    sign, digits_t, exp = Decimal(repr(x)).as_tuple()
    digits = "".join(map(str, digits_t)).rstrip("0")
    assert isinstance(exp, int)  # a finite number
    n = exp + len("".join(map(str, digits_t))) if digits else 0
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        out = "0." + "0" * -n + digits
    else:
        e = n - 1
        out = digits[0] + (f".{digits[1:]}" if k > 1 else "") + f"e{'+' if e >= 0 else '-'}{abs(e)}"
    return ("-" if sign else "") + out


def js_string(value: Any) -> str:
    """What JavaScript's ``result += value`` writes (OpenPAI renders with it): a list joins with ",", an
    object is ``[object Object]``, booleans are lower case, numbers as JavaScript prints them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, float) or (isinstance(value, int) and abs(value) >= 2**53):
        return _js_number(float(value))  # JavaScript has no integers beyond 2**53: YAML's become the nearest double
    return str(value)


def render(text: str, scopes: dict[str, Any]) -> str:
    """OpenPAI's server-side render (middlewares/v2/protocol.js): each ``<% $scope.path %>`` it finds becomes its
    value as JavaScript writes it (a list ``a,b``); a name it cannot find, or a null, is written back as
    ``<% name %>`` (an index ``[0]`` as ``.0``), for the runtime's pass (``render_secrets``) to see."""

    def sub(match: re.Match[str]) -> str:
        name = re.sub(r"\[(\d+)\]", r".\1", match["name"])
        value = _lookup(scopes, name)
        return f"<% {name} %>" if value is None else js_string(value)

    return _TAG.sub(sub, text)


def render_secrets(text: str, secrets: dict[str, Any]) -> str:
    """The runtime's pass of a job with secrets (openpai-runtime's render_string_with_secrets, on pystache):
    ``<% $secrets.path %>`` becomes the secret, and every other name left renders empty. (pystache would also
    HTML-escape the secret; a shell command wants it as written, so it is not.)"""

    def sub(match: re.Match[str]) -> str:
        value = _lookup({"secrets": secrets}, re.sub(r"\[(\d+)\]", r".\1", match["name"]))
        return "" if value is None else str(value)  # Python's str, as pystache writes it

    return _TAG.sub(sub, text)


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
    """The shell script a task runs: default deployment pre-commands, the commands, post-commands, rendered as
    OpenPAI's server does, then as its runtime does in a job with secrets."""
    phase = job.role_commands(role)
    lines = [*phase.pre_commands, *role.commands, *phase.post_commands]
    text = "\n".join(render(line.strip(), role_scopes(job, role, with_secrets=False)) for line in lines if line.strip())
    return render_secrets(text, job.secrets) if job.secrets else text


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
