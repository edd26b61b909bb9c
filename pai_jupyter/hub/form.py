"""The spawn page's form: the fields of the one form definition (``protocol/formspec.py``: virtual cluster, CPUs,
memory, GPUs, image, max run time), checked by the same rules as the Lab's and the notebook's forms (the form's
v1 document through ``protocol``), each problem shown beside its field.

Everything the page shows that came from a user or the cluster (values, virtual cluster names, messages) is
HTML-escaped here; JupyterHub puts the form into its page as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from html import escape
from typing import Any

from ..protocol import load as protocol_load
from ..protocol.errors import JobValidationError
from ..protocol.formspec import JOB_FIELDS, ROLE_FIELDS, FormField, field_id, vc_field
from .serverjob import ROLE, ServerOptions

# the spawn page's fields, in order: (form key, the definition's field); a role field's id is "roles.0.<key>"
FIELDS: tuple[tuple[str, FormField], ...] = (
    ("vc", next(f for f in JOB_FIELDS if f.key == "vc")),
    ("cpu", next(f for f in ROLE_FIELDS if f.key == "cpu")),
    ("memory", next(f for f in ROLE_FIELDS if f.key == "memory")),
    ("gpu", next(f for f in ROLE_FIELDS if f.key == "gpu")),
    ("image", next(f for f in JOB_FIELDS if f.key == "image")),
    ("max_run", next(f for f in JOB_FIELDS if f.key == "max_run")),
)
ROLE_KEYS = {"cpu", "memory", "gpu"}
DEFAULTS: dict[str, Any] = {key: f.default for key, f in FIELDS} | {"memory": 2048}


class FormError(ValueError):
    """The form's values break rules: ``problems`` maps a field (or "" for the form as a whole) to its messages;
    ``values`` are what was typed, to show again."""

    def __init__(self, problems: dict[str, list[str]], values: dict[str, str]) -> None:
        count = sum(len(v) for v in problems.values())
        super().__init__(f"the form has {count} problem{'s' * (count != 1)}: see the fields marked below")
        self.problems = problems
        self.values = values


@dataclass(frozen=True)
class Rendered:
    """What a form shows: the values and, after a refused submission, the problems by field."""

    values: Mapping[str, Any]
    problems: Mapping[str, list[str]]


def render(vcs: Sequence[str] | None, why: str, shown: Rendered) -> str:
    """The form's HTML (inside JupyterHub's spawn form): a choice of the user's virtual clusters (a text box with a
    note when the cluster could not say), numbers for the resources, the image and the max run time."""
    out = ['<div class="pai-spawn-form">']
    if shown.problems.get(""):
        out += [f'<p class="alert alert-danger pai-error">{escape(m)}</p>' for m in shown.problems[""]]
    for key, spec in FIELDS:
        f = vc_field(vcs, why) if key == "vc" else spec
        value = shown.values.get(key, DEFAULTS[key])
        problems = shown.problems.get(key, [])
        invalid = " is-invalid" if problems else ""
        ident = f"pai-{key}"
        out.append(f'<div class="mb-3 pai-field" data-field="{key}">')
        out.append(f'<label class="form-label" for="{ident}">{escape(f.label)}</label>')
        if f.kind == "choice":
            chosen = str(value) if str(value) in f.options else str(f.default)
            options = "".join(
                f'<option value="{escape(o)}"{" selected" if o == chosen else ""}>{escape(o)}</option>'
                for o in f.options
            )
            out.append(f'<select class="form-select{invalid}" id="{ident}" name="{key}">{options}</select>')
        else:
            kind = "number" if f.kind in ("number", "minutes") else "text"
            extra = ' min="0" step="any"' if f.kind == "minutes" else (' min="0"' if kind == "number" else "")
            out.append(
                f'<input class="form-control{invalid}" id="{ident}" name="{key}" type="{kind}"{extra} '
                f'value="{escape(str(value))}">'
            )
        if f.note:
            out.append(f'<div class="form-text pai-note">{escape(f.note)}</div>')
        elif f.help:
            out.append(f'<div class="form-text">{escape(f.help)}</div>')
        out += [f'<div class="invalid-feedback d-block pai-error">{escape(m)}</div>' for m in problems]
        out.append("</div>")
    out.append("</div>")
    return "\n".join(out)


def _number(text: str) -> Any:
    """A typed number as the document holds it (an int where it is one); text that is none stays text, so the
    job's rules say what is wrong with it in their own words."""
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def typed(formdata: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """The form's fields as typed (one value each; missing ones their defaults)."""
    return {key: str((formdata.get(key) or [DEFAULTS[key]])[0]).strip() for key, _ in FIELDS}


def document(values: Mapping[str, str]) -> dict[str, Any]:
    """The v1 document the Lab's form would write for these values, for the rules to check."""
    role = {
        "name": ROLE,
        "taskNumber": 1,
        "cpuNumber": _number(values["cpu"]),
        "memoryMB": _number(values["memory"]),
        "gpuNumber": _number(values["gpu"]),
        "command": "jupyterhub-singleuser",
    }
    doc: dict[str, Any] = {
        "jobName": "jupyterhub-server",
        "image": values["image"],
        "virtualCluster": values["vc"] or "default",
        "taskRoles": [role],
    }
    if _minutes(values["max_run"]) is not None:
        doc["extras"] = {"maxRunTimeMinutes": _minutes(values["max_run"])}
    return doc


def _minutes(text: str) -> Any:
    """The max run time typed: None for none (empty or 0), else as the document holds it."""
    value = _number(text) if text else 0
    return None if value == 0 else value


def placed(exc: JobValidationError) -> dict[str, list[str]]:
    """Each problem under the form key of its field ("" for the form as a whole)."""
    keys = {key for key, _ in FIELDS}
    out: dict[str, list[str]] = {}
    for p in exc.problems:
        fid = field_id(p.path)
        key = fid.removeprefix("roles.0.") if fid.startswith("roles.0.") else fid
        out.setdefault(key if key in keys else "", []).append(p.message if key in keys else str(p))
    return out


def options(formdata: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The user options the form's data makes (JupyterHub keeps them as the spawner's ``user_options``), after the
    job rules passed; FormError saying what is wrong, by field, when they do not."""
    values = typed(formdata)
    try:
        protocol_load.job_from_text(json.dumps(document(values)))
    except JobValidationError as exc:
        raise FormError(placed(exc), values) from None
    return {
        "vc": values["vc"] or "default",
        "cpu": int(_number(values["cpu"])),
        "memoryMB": int(_number(values["memory"])),
        "gpu": int(_number(values["gpu"])),
        "image": values["image"],
        "maxRunTimeMinutes": _minutes(values["max_run"]),
    }


def server_options(user_options: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> ServerOptions:
    """ServerOptions from the spawner's ``user_options`` (what ``options`` made, or the API's own), the
    defaults where a key is missing; FormError when they break the job's rules (the API bypasses the form)."""
    base = {**DEFAULTS, **(defaults or {})}
    given = {
        "vc": user_options.get("vc", base["vc"]),
        "cpu": user_options.get("cpu", base["cpu"]),
        "memory": user_options.get("memoryMB", base["memory"]),
        "gpu": user_options.get("gpu", base["gpu"]),
        "image": user_options.get("image", base["image"]),
        "max_run": user_options.get("maxRunTimeMinutes") or base["max_run"] or "",
    }
    checked = options({k: [str(v)] for k, v in given.items()})
    return replace(
        ServerOptions(),
        virtual_cluster=checked["vc"],
        cpu=checked["cpu"],
        memory_mb=checked["memoryMB"],
        gpu=checked["gpu"],
        image=checked["image"],
        max_run_minutes=checked["maxRunTimeMinutes"],
    )
