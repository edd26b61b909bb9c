"""The pieces of JobForm: a labelled field with its error line, a task role's fields, and the map from a
problem's field path (``taskRoles[0].memoryMB``, ``task_roles[0].memory_mb``) to the widget it is about."""

from __future__ import annotations

import re
from typing import Any

import ipywidgets as W

from .display import esc

PLUGIN_KEY = "com.microsoft.pai.runtimeplugin"
DEFAULT_COMMAND = "sleep infinity"
STYLE = {"description_width": "140px"}
WIDE = W.Layout(width="520px")

JOB_KEYS = {
    "jobName": "name",
    "name": "name",
    "image": "image",
    "gpuType": "gpu_type",
    "virtualCluster": "vc",
    "retryCount": "retry",
    "jobEnvs": "env",
    "storages": "storages",
    PLUGIN_KEY: "plugins",
    "maxRunTimeMinutes": "max_run",
}
ROLE_KEYS = {
    "name": "name",
    "taskNumber": "instances",
    "command": "command",
    "shmMB": "shm",
    "cpuNumber": "cpu",
    "gpuNumber": "gpu",
    "memoryMB": "memory",
    "portList": "ports",
    "minFailedTaskCount": "min_failed",
    "minSucceededTaskCount": "min_succeeded",
}
_ROLE_PATH = re.compile(r"^taskRoles\[(\d+)\](?:\.(\w+))?")


def locate(path: str) -> tuple[int | None, str | None]:
    """(role index or None for the job, the form's field name) a problem path is about; (None, None) if none."""
    from ..protocol.v1 import v1_path

    path = v1_path(path)  # a model path (a conversion's, a builder's) as the v1 key the form's document uses
    m = _ROLE_PATH.match(path)
    if m:
        return int(m.group(1)), ROLE_KEYS.get(m.group(2), "name" if m.group(2) is None else None)
    if path.startswith("extras."):
        rest = path[len("extras.") :]
        if rest.startswith(PLUGIN_KEY):
            return None, "plugins"
        head = rest.split(".")[0].split("[")[0]
        return None, JOB_KEYS.get(head)
    head = re.split(r"[.\[]", path, maxsplit=1)[0]
    return None, JOB_KEYS.get(head)


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

    def set_error(self, messages: list[str]) -> None:
        self.error.value = ("<span style='color:#cf222e'>" + esc("; ".join(messages)) + "</span>") if messages else ""

    def show(self, visible: bool) -> None:
        self.box.layout.display = "" if visible else "none"


def text(label: str, value: str = "", placeholder: str = "", tooltip: str = "") -> Field:
    return Field(W.Text(value=value, placeholder=placeholder, layout=WIDE), label, tooltip)


def number(label: str, value: int, tooltip: str = "") -> Field:
    """Unbounded on purpose: a value out of range stays as typed and its error shows beside it."""
    return Field(W.IntText(value=value, layout=W.Layout(width="300px")), label, tooltip)


def area(label: str, value: str = "", placeholder: str = "", tooltip: str = "", rows: int = 3) -> Field:
    return Field(W.Textarea(value=value, placeholder=placeholder, rows=rows, layout=WIDE), label, tooltip)


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
    """One task role: seed 001's task settings (basic) plus memory, instances and completion policy (pro)."""

    BASIC = ("name", "command", "shm", "cpu", "gpu", "ports")

    def __init__(self, name: str = "main"):
        self.name = text("Task role name", name, tooltip="letters, digits, '.', '_', '~'")
        self.command = area("Command", DEFAULT_COMMAND, rows=4, tooltip="a shell script; one command a line")
        self.shm = number("Shared memory MB", 64)
        self.cpu = number("CPU", 1)
        self.gpu = number("GPU", 0)
        self.ports = text("Exposed ports", placeholder="http:1, ssh:1", tooltip="label:count, comma-separated")
        self.memory = number("Memory MB", 1024)
        self.instances = number("Instances", 1, tooltip="identical tasks in this role")
        self.min_failed = number("Min failed tasks", 1, tooltip="failed tasks that fail the job; 0 = never")
        self.min_succeeded = number("Min succeeded", 0, tooltip="succeeded tasks that end the job; 0 = all")
        self.fields: dict[str, Field] = {k: getattr(self, k) for k in ROLE_KEYS.values()}
        self.box = W.VBox([f.box for f in self.fields.values()])

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
        role = {
            "name": self.name.value,
            "taskNumber": self.instances.value,
            "cpuNumber": self.cpu.value,
            "memoryMB": self.memory.value,
            "shmMB": self.shm.value,
            "gpuNumber": self.gpu.value,
            "command": self.command.value,
            "minFailedTaskCount": self.min_failed.value or None,
            "minSucceededTaskCount": self.min_succeeded.value or None,
        }
        if ports:
            role["portList"] = ports
        return role, bad

    def from_v1(self, role: dict[str, Any]) -> None:
        """Fill the fields from a v1 role (values of the wrong type are left as they were; validation says why)."""

        def put(field: Field, value: Any, default: Any) -> None:
            value = default if value is None else value
            if isinstance(value, type(default)) and not isinstance(value, bool):
                field.value = value

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
