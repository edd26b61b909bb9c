"""What OpenPAI's REST server and runtime answer, transcribed as small reference functions (test oracles): the job
list's filters and order (``controllers/v2/job.js`` list, on its PostgreSQL through Sequelize), the ``<% %>``
renderer of commands (``middlewares/v2/protocol.js`` render, on mustache.js, then the runtime's
``render_string_with_secrets`` on pystache), and the exit spec table (tests/data/openpai/k8s-job-exit-spec.yaml,
read by ``models/v2/utils/frameworkConverter.js`` generateExitSpec). Facts transcribed from OpenPAI (MIT)."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parent.parent / "data" / "openpai"

# ---- the job list ------------------------------------------------------------------------------------------------
# controllers/v2/job.js: `order` takes these fields only, with exactly ASC or DESC; anything else is the default
# submissionTime,DESC. The list item's key each one sorts by:
ORDER_FIELDS = {
    "jobName": "name",
    "submissionTime": "submissionTime",
    "username": "username",
    "vc": "virtualCluster",
    "retries": "retries",
    "totalTaskNumber": "totalTaskNumber",
    "totalGpuNumber": "totalGpuNumber",
    "state": "state",
    "completionTime": "completedTime",
    "jobPriority": "jobPriority",
}


def openpai_list(items: list[dict[str, Any]], query: dict[str, str]) -> list[dict[str, Any]]:
    """The list OpenPAI answers for ``query``. ``items`` are list items in submission order, ``jobPriority`` None
    for a job without a priority class. Ties (which OpenPAI leaves to the database) keep submission order in the
    direction asked."""
    out = list(items)
    for param, key in (("username", "username"), ("vc", "virtualCluster"), ("state", "state")):
        if param in query:
            out = [j for j in out if j[key] in query[param].split(",")]
    if "tagsContain" in query:  # at least one of these tags
        out = [j for j in out if set(j["tags"]) & set(query["tagsContain"].split(","))]
    if "tagsNotContain" in query:  # none of these tags
        out = [j for j in out if not set(j["tags"]) & set(query["tagsNotContain"].split(","))]
    if "keyword" in query:
        k = query["keyword"]
        out = [j for j in out if k in j["username"] or k in j["name"] or k in j["virtualCluster"]]
    if "jobPriority" in query:  # "default" is a job without a priority class (jobPriority IS NULL)
        wanted = query["jobPriority"].split(",")
        out = [j for j in out if (j["jobPriority"] is None and "default" in wanted) or j["jobPriority"] in wanted]
    field, _, ordering = query.get("order", "").partition(",")
    if field not in ORDER_FIELDS or ordering not in ("ASC", "DESC"):
        field, ordering = "submissionTime", "DESC"
    key = ORDER_FIELDS[field]
    desc = ordering == "DESC"
    # PostgreSQL: NULL sorts above every value (last ASC, first DESC); ties in submission order
    indexed = sorted(enumerate(out), key=lambda p: ((p[1][key] is None), p[1][key] or 0, p[0]), reverse=desc)
    return [j for _, j in indexed]


# ---- rendering commands ------------------------------------------------------------------------------------------
_MUSTACHE_NAME = re.compile(r"<%\s*([^#^/!>&{=][^%]*?)\s*%>")


def _js_string(value: Any) -> str:
    """JavaScript's ``'' + value`` for what YAML gives: arrays join with ',', objects are [object Object]."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join("" if v is None else _js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, float) or (isinstance(value, int) and abs(value) >= 2**53):
        return _js_number(float(value))  # js-yaml reads a big integer as the nearest double
    return str(value)


def _js_number(value: float) -> str:
    """ECMAScript's Number::toString: the shortest digits that round-trip (Python's repr has the same), written
    in plain decimals for exponents from -7 to 21 and as ``1e-7``/``1.5e+21`` outside them."""
    if not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "0"
    if value < 0:
        return "-" + _js_number(-value)
    mantissa, _, exp = f"{value!r}".partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    n = len(whole) + int(exp or 0) if whole != "0" else int(exp or 0) - (len(frac) - len(frac.lstrip("0")))
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    sign = "+" if n - 1 >= 0 else "-"
    return (digits[0] + ("." + digits[1:] if k > 1 else "")) + f"e{sign}{abs(n - 1)}"


def _lookup(scopes: dict[str, Any], name: str) -> Any:
    """mustache.js Context.lookup of a dotted name (``a.b.0``) in ``{"$parameters": ..., ...}``."""
    parts = name.split(".")
    value: Any = scopes.get(parts[0])
    for part in parts[1:]:
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def openpai_render(commands: list[str], parameters: dict[str, Any], secrets: dict[str, Any] | None) -> str:
    """The script OpenPAI runs: the server renders ``$parameters`` (a name it cannot resolve, or a null, is
    written back as ``<% name %>``); the runtime then renders ``$secrets`` when the job has any, and there every
    name pystache cannot resolve renders empty."""
    text = "\n".join(c.strip() for c in commands)

    def server(m: re.Match[str]) -> str:
        name = re.sub(r"\[(\d+)\]", r".\1", m.group(1))
        value = _lookup({"$parameters": parameters}, name)
        return f"<% {name} %>" if value is None else _js_string(value)

    text = _MUSTACHE_NAME.sub(server, text).strip()
    if not secrets:
        return text

    def runtime(m: re.Match[str]) -> str:
        value = _lookup({"$secrets": secrets}, re.sub(r"\[(\d+)\]", r".\1", m.group(1)))
        return "" if value is None else str(value)

    return _MUSTACHE_NAME.sub(runtime, text)


# ---- exit specs --------------------------------------------------------------------------------------------------
@functools.cache
def exit_spec_table() -> dict[int, dict[str, Any]]:
    spec = yaml.safe_load((DATA / "k8s-job-exit-spec.yaml").read_text())["spec"]
    return {s["code"]: s for s in spec}


def openpai_exit_spec(code: int) -> dict[str, Any]:
    """generateExitSpec: the table's entry, or the fallback of its sign (256 or -8000) with the code itself."""
    table = exit_spec_table()
    if code in table:
        return table[code]
    return {**table[256 if code > 0 else -8000], "code": code}


# ---- the ssh plugin's barrier -----------------------------------------------------------------------------------
# openpai-runtime src/plugins/ssh/sshbarrier.sh: RETRY_INTERVAL=10; MAX_RETRY_COUNT=1800, or sshbarrierTimeout
# (minutes) * 60 / RETRY_INTERVAL when given
SSH_BARRIER_RETRY_INTERVAL_S = 10
SSH_BARRIER_DEFAULT_RETRIES = 1800


def openpai_barrier_seconds(timeout_minutes: float | None) -> float:
    retries = SSH_BARRIER_DEFAULT_RETRIES if timeout_minutes is None else timeout_minutes * 60 // 10
    return retries * SSH_BARRIER_RETRY_INTERVAL_S
