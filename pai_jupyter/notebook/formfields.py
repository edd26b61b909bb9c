"""The pieces of JobForm: a labelled field with its error line and a task role's fields, made from the shared
form definition (``protocol/formspec.py``, which also maps a problem's path to the field it is about)."""

from __future__ import annotations

import re
from typing import Any

import ipywidgets as W

from ..protocol.formspec import DEFAULT_COMMAND, PLUGIN_KEY, ROLE_FIELDS, FormField, locate
from .display import esc

__all__ = ["DEFAULT_COMMAND", "PLUGIN_KEY", "ChoiceField", "Field", "RoleFields", "locate", "parse_pairs", "spec_field"]
STYLE = {"description_width": "220px"}


_ROLE_PATHS = {f.path for f in ROLE_FIELDS}


def wide() -> W.Layout:
    """A Layout of its own for each widget: one module-level Layout shared by every form was made once, so a page
    opened later (a browser reload) could be asked to draw a form that refers to a model it never got."""
    return W.Layout(width="520px")


class Field:
    """A labelled input with its own error line underneath (live validation shows each problem here)."""

    def __init__(self, widget: W.Widget, label: str, tooltip: str = ""):
        self.widget = widget
        widget.description = label
        widget.style = STYLE
        if tooltip:
            widget.tooltip = tooltip
        self.error = W.HTML("")
        self.box = W.VBox([widget, self.error])

    @property
    def value(self) -> Any:
        return self.widget.value

    @value.setter
    def value(self, v: Any) -> None:
        self.widget.value = v

    def observe(self, callback: Any) -> None:
        self.widget.observe(callback, names="value")

    def set_error(self, messages: list[str]) -> None:
        self.error.value = ("<span style='color:#cf222e'>" + esc("; ".join(messages)) + "</span>") if messages else ""

    def show(self, visible: bool) -> None:
        self.box.layout.display = "" if visible else "none"


class ChoiceField(Field):
    """A field whose choices the cluster gives (the virtual clusters the user may submit to): a select of them, or,
    before they came or when they could not be fetched, the text box with a note saying why. ``offer`` takes what
    ``formspec.vc_field`` made of the cluster's answer; the value typed or picked so far stays."""

    def __init__(self, f: FormField, tooltip: str = ""):
        self.initial = str(f.default)
        self.text = W.Text(value=self.initial, placeholder=f.placeholder, layout=wide())
        self.select = W.Dropdown(options=[self.initial], value=self.initial, layout=wide())
        super().__init__(self.text, f.label, tooltip)
        self.select.description, self.select.style = f.label, STYLE
        if tooltip:
            self.select.tooltip = tooltip
        self.note = W.HTML("")
        self.box = W.VBox([self.text, self.select, self.note, self.error])
        self.offer(f)

    def offer(self, f: FormField) -> None:
        current = self.value
        if f.kind == "choice" and f.options:
            keep = current not in ("", self.initial) or current in f.options  # typed or loaded: kept, even unknown
            value = current if keep else str(f.default)
            self.select.options = [*f.options, *([] if value in f.options else [value])]
            self.select.value = value
            self.widget = self.select
        else:
            self.text.value = current
            self.widget = self.text
        self.select.layout.display = "" if self.widget is self.select else "none"
        self.text.layout.display = "" if self.widget is self.text else "none"
        self.note.value = f"<small style='color:#8a6d00'>{esc(f.note)}</small>" if f.note else ""

    @property
    def value(self) -> Any:
        return self.widget.value

    @value.setter
    def value(self, v: Any) -> None:
        if self.widget is self.select:
            options = list(self.select.options)
            v = v or (self.initial if self.initial in options else options[0])
            if v not in options:  # a loaded document's: shown as it is, the cluster says if it is wrong
                self.select.options = [*options, v]
        self.widget.value = v

    def observe(self, callback: Any) -> None:
        for w in (self.text, self.select):
            w.observe(callback, names="value")


def text(label: str, value: str = "", placeholder: str = "", tooltip: str = "") -> Field:
    return Field(W.Text(value=value, placeholder=placeholder, layout=wide()), label, tooltip)


def number(label: str, value: int, tooltip: str = "") -> Field:
    """Unbounded on purpose: a value out of range stays as typed and its error shows beside it."""
    return Field(W.IntText(value=value, layout=W.Layout(width="300px")), label, tooltip)


def area(label: str, value: str = "", placeholder: str = "", tooltip: str = "", rows: int = 3) -> Field:
    return Field(W.Textarea(value=value, placeholder=placeholder, rows=rows, layout=wide()), label, tooltip)


def spec_field(f: FormField) -> Field:
    """The widget the shared form definition asks for; its tooltip gives the user guide's Chinese label and the help."""
    tooltip = " — ".join(t for t in (f.label_zh, f.help) if t)
    if f.kind == "minutes":  # the user guide's "work duration"; 0 = no limit
        widget = W.BoundedFloatText(value=float(f.default), min=0, max=1e6, step=10, layout=W.Layout(width="300px"))
        return Field(widget, f.label, tooltip)
    if f.kind == "number":
        return number(f.label, int(f.default), tooltip)
    if f.kind == "choice":
        return ChoiceField(f, tooltip)
    if f.kind in ("area", "pairs", "storages"):
        return area(f.label, str(f.default), f.placeholder, tooltip, rows=4 if f.kind == "area" else 3)
    return text(f.label, str(f.default), f.placeholder, tooltip)


def icon_html(shapes: str) -> str:
    """A service's catalogue icon (SVG shapes in a 24x24 box, common/services.py) beside its switch, in the
    notebook's text colour. The shapes are the catalogue's constants, never user text."""
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16" height="16" fill="currentColor" '
        f'style="vertical-align: middle" class="pai-service-icon">{shapes}</svg>'
    )


def parse_pairs(value: str, sep: str, what: str) -> tuple[list[tuple[str, str]], list[str]]:
    """``a=1`` / ``data:/mnt/data`` lines (or comma-separated items) -> pairs, and what could not be read."""
    pairs, bad = [], []
    for item in re.split(r"[\n,]", value):
        item = item.strip()
        if not item:
            continue
        key, found, val = item.partition(sep)
        if not found or not key.strip():
            bad.append(f"{item!r} is not {what}")
        else:
            pairs.append((key.strip(), val.strip()))
    return pairs, bad


class RoleFields:
    """One task role: its fields, labels, order and modes from the shared form definition (the user guide's task
    settings and memory in basic mode; instances and completion policy in pro mode)."""

    BASIC = tuple(f.key for f in ROLE_FIELDS if not f.pro)

    def __init__(self, name: str = "main"):
        self.fields: dict[str, Field] = {f.key: spec_field(f) for f in ROLE_FIELDS}
        self.fields["name"].value = name
        self.name, self.command, self.shm = self.fields["name"], self.fields["command"], self.fields["shm"]
        self.cpu, self.gpu, self.ports = self.fields["cpu"], self.fields["gpu"], self.fields["ports"]
        self.memory, self.instances = self.fields["memory"], self.fields["instances"]
        self.min_failed, self.min_succeeded = self.fields["min_failed"], self.fields["min_succeeded"]
        self.box = W.VBox([f.box for f in self.fields.values()])
        self.base: dict[str, Any] = {}

    def set_pro(self, pro: bool) -> None:
        for key, f in self.fields.items():
            f.show(pro or key in self.BASIC)

    def to_v1(self) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The role as v1 JSON, and the problems of fields that could not be read."""
        bad: dict[str, list[str]] = {}
        pairs, wrong = parse_pairs(self.ports.value, ":", "label:count")
        ports = []
        for label, count in pairs:
            if count.isdigit():
                ports.append({"label": label, "beginAt": 0, "portNumber": int(count)})
            else:
                wrong.append(f"{count!r} is not a port count")
        if wrong:
            bad["ports"] = wrong
        role = dict(self.base)
        for f in ROLE_FIELDS:
            value = self.fields[f.key].value
            if f.key == "ports" or (f.optional and value == f.default):  # as the Lab's form: left out
                role.pop(f.path, None)
            else:
                role[f.path] = value
        if ports:
            role["portList"] = ports
        return role, bad

    def from_v1(self, role: dict[str, Any]) -> None:
        """Fill the fields from a v1 role (values of the wrong type are left as they were; validation says why)."""

        def put(field: Field, value: Any, default: Any) -> None:
            value = default if value is None else value
            if isinstance(value, type(default)) and not isinstance(value, bool):
                field.value = value

        self.base = {k: v for k, v in role.items() if k not in _ROLE_PATHS}  # no field for it: kept as loaded
        put(self.name, role.get("name"), "")
        put(self.command, role.get("command"), "")
        put(self.instances, role.get("taskNumber"), 1)
        put(self.cpu, role.get("cpuNumber"), 1)
        put(self.memory, role.get("memoryMB"), 1024)
        put(self.shm, role.get("shmMB"), 64)
        put(self.gpu, role.get("gpuNumber"), 0)
        put(self.min_failed, role.get("minFailedTaskCount", 1), 0)
        put(self.min_succeeded, role.get("minSucceededTaskCount"), 0)
        ports = role.get("portList") or []
        self.ports.value = (
            ", ".join(f"{p.get('label')}:{p.get('portNumber', 1)}" for p in ports if isinstance(p, dict))
            if isinstance(ports, list)
            else ""
        )

    def observe(self, callback: Any) -> None:
        for f in self.fields.values():
            f.widget.observe(callback, names="value")

    def close(self) -> None:
        for f in self.fields.values():
            for w in (f.widget, f.error, f.box):
                w.close()
        self.box.close()


def profile_names() -> tuple[list[str], str]:
    from ..client import load_profiles

    try:
        profiles = load_profiles()
    except Exception:  # a broken clusters.yaml must not break the form; the client will say what is wrong
        return ["local"], "local"
    return [p.name for p in profiles], next((p.name for p in profiles if p.default), profiles[0].name)
