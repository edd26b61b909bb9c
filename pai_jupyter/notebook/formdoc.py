"""How JobForm's fields map to and from its document: v1 JSON, the format of the user guide's "Edit JSON" window.

The job's fields are read and written by their kind and v1 path from the one form definition
(protocol/formspec.py ``JOB_FIELDS``), the way the Lab's form does (labextension/src/formdoc.ts), so a field added
there needs nothing here. Keys the form has no field for (``dataDir``, other ``extras``, ...) are kept from the last
document loaded, so Import -> Edit -> Submit loses nothing the form does not show.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from ..protocol import formspec
from ..protocol.formspec import FormField
from .formfields import PLUGIN_KEY, Field, RoleFields, parse_pairs

_EXTRAS = "extras."
# a text kind's parsing: the separator of its lines and what a line should look like
_LINES = {"pairs": ("=", "KEY=value"), "storages": (":", "name:/mount/path")}


def _number(value: Any) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _to_doc(f: FormField, value: Any) -> tuple[Any, list[str]]:
    """What a job field's value puts at its path (None: nothing) and why lines of it could not be read."""
    if f.kind in _LINES:
        sep, what = _LINES[f.kind]
        pairs, wrong = parse_pairs(value, sep, what)
        if f.kind == "storages":
            return [{"name": n, "mountPath": p} for n, p in pairs] or None, wrong
        return dict(pairs) or None, wrong
    if f.kind in ("number", "minutes"):
        return (None if f.optional and value == f.default else _number(value)), []
    if f.kind == "choice":
        return value or f.default, []
    if f.optional:
        return value.strip() or None, []
    return value, []


def _from_doc(f: FormField, value: Any) -> Any:
    """A job field's value from what the document has at its path (the field's blank when it is not that kind)."""
    if f.kind in _LINES:
        if f.kind == "storages":
            items = value if isinstance(value, list) else []
            return "\n".join(f"{m.get('name')}:{m.get('mountPath', '')}" for m in items if isinstance(m, dict))
        return "\n".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else ""
    if f.kind in ("number", "minutes"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return value if ok and (f.kind == "minutes" or isinstance(value, int)) else (0 if f.optional else f.default)
    if f.kind == "choice" and value is None:
        return f.default
    return value if isinstance(value, str) else ""


def _blank(f: FormField) -> Any:
    return 0 if f.kind in ("number", "minutes") else ""


class DocumentFields:
    """Mixin for JobForm: ``to_v1`` builds the document from the fields, ``_fill`` sets the fields from one."""

    _base: dict[str, Any]
    roles: list[RoleFields]
    job_fields: dict[str, Field]  # the job's field widgets by their key in the definition (and "plugins")
    switches: dict[str, W.Checkbox]  # a runtime plugin's switch, by its name (protocol/formspec.py plugin_fields)
    params: dict[str, W.Text]  # a plugin parameter's text box, by its field key
    plugin_params: dict[str, tuple[str, str]]  # a parameter's field key -> (its plugin, its name in ``parameters``)
    pro: W.Checkbox
    _changed: Callable[..., None]  # JobForm's methods
    _retab: Callable[[], None]

    def to_v1(self) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The v1 JSON the fields say, and problems of fields that could not be read (bad ``KEY=value`` lines)."""
        bad: list[tuple[str, str]] = []
        own = {f.path for f in formspec.JOB_FIELDS}
        doc = {k: v for k, v in self._base.items() if k not in own and k != "extras"}
        extras = {
            k: v for k, v in (self._base.get("extras") or {}).items() if k != PLUGIN_KEY and _EXTRAS + k not in own
        }
        for f in formspec.JOB_FIELDS:
            value, wrong = _to_doc(f, self.job_fields[f.key].value)
            bad += [(f.path, w) for w in wrong]
            if value is not None:
                if f.path.startswith(_EXTRAS):
                    extras[f.path.removeprefix(_EXTRAS)] = value
                else:
                    doc[f.path] = value
        plugins = self._plugins_to_v1()
        if plugins:
            extras[PLUGIN_KEY] = plugins
        if extras:
            doc["extras"] = extras
        doc["taskRoles"] = []
        for i, r in enumerate(self.roles):
            role, role_bad = r.to_v1()
            doc["taskRoles"].append(role)
            bad += [(f"taskRoles[{i}].portList", m) for m in role_bad.get("ports", [])]
        return doc, bad

    def _plugins_to_v1(self) -> list[dict[str, Any]]:
        """The runtime plugins: those without a switch as loaded, then each switched on with its edited parameters."""
        loaded = [p for p in (self._base.get("extras") or {}).get(PLUGIN_KEY) or [] if isinstance(p, dict)]
        plugins = [p for p in loaded if p.get("plugin") not in self.switches]  # others (git, cmd, ...): as loaded
        for name, box in self.switches.items():
            if not box.value:
                continue
            entry = {**next((p for p in loaded if p.get("plugin") == name), {}), "plugin": name}
            edited = {key: param for key, (plugin, param) in self.plugin_params.items() if plugin == name}
            if edited:  # the parameters the form edits; the others kept as loaded
                params = {k: v for k, v in (entry.get("parameters") or {}).items() if k not in edited.values()}
                params |= {param: v for key, param in edited.items() if (v := self.params[key].value.strip())}
                entry.pop("parameters", None)
                if params:
                    entry["parameters"] = params
            plugins.append(entry)
        return plugins

    def to_json(self) -> str:
        return json.dumps(self.to_v1()[0], indent=2, ensure_ascii=False)

    def _fill(self, doc: dict[str, Any]) -> None:
        self._base = dict(doc)
        extras = doc.get("extras")
        extras = extras if isinstance(extras, dict) else {}
        for f in formspec.JOB_FIELDS:
            where, key = (extras, f.path.removeprefix(_EXTRAS)) if f.path.startswith(_EXTRAS) else (doc, f.path)
            self.job_fields[f.key].value = _from_doc(f, where.get(key))
        plugins = {p.get("plugin"): p for p in extras.get(PLUGIN_KEY) or [] if isinstance(p, dict)}
        for name, box in self.switches.items():
            box.value = name in plugins
        for key, (plugin, param) in self.plugin_params.items():
            value = ((plugins.get(plugin) or {}).get("parameters") or {}).get(param)
            self.params[key].value = value if isinstance(value, str) else ""
        roles = [r for r in doc.get("taskRoles") or [] if isinstance(r, dict)] or [{}]
        # the role widgets already shown are filled again, not replaced: a tab whose selected child is replaced
        # stays blank in the browser until clicked (ipywidgets draws the new child after the selection)
        for old in self.roles[len(roles) :]:
            old.close()
        added = [RoleFields() for _ in range(len(roles) - len(self.roles))]
        for fields in added:
            fields.observe(self._changed)
        self.roles = self.roles[: len(roles)] + added
        for fields, role in zip(self.roles, roles, strict=True):
            fields.from_v1(role)
        self._retab()
        pro_set = any(self.job_fields[f.key].value != _blank(f) for f in formspec.JOB_FIELDS if f.pro)
        if len(roles) > 1 or pro_set or any(r.instances.value != 1 for r in self.roles):
            self.pro.value = True
