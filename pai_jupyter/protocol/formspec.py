"""The submit form's one definition: its fields, labels (English and the user guide's Chinese), order and modes.

The Lab form (``labextension/src/form.ts``, fed by the server's ``pai/api/form``) and the notebook's ``JobForm``
both draw from this list, so the two forms cannot drift apart. Each field names the v1 key it edits (the form's
document is v1 JSON, the platform user guide's "Edit JSON" format); ``locate`` maps a problem's path back to the field.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from ..common import services
from .v1 import v1_path

PLUGIN_KEY = "com.microsoft.pai.runtimeplugin"
DEFAULT_COMMAND = "sleep infinity"

Kind = Literal["text", "number", "minutes", "area", "pairs", "storages", "ports", "switch", "choice"]


@dataclass(frozen=True)
class FormField:
    """One input. ``key`` is the field's name in both forms (JobForm's attribute, the Lab's field id)."""

    key: str
    path: str  # the v1 key it edits: "jobName", "extras.maxRunTimeMinutes", "taskNumber" (in a role)
    label: str
    label_zh: str
    kind: Kind
    default: Any = ""
    pro: bool = False  # shown only in pro mode
    optional: bool = False  # left out of the document while empty or at its default
    help: str = ""
    placeholder: str = ""
    options: tuple[str, ...] = ()  # a "choice": what may be picked, the cluster's answer
    note: str = ""  # shown under the input: why a choice is a text box this time
    icon: str = ""  # a switch's service's icon (SVG shapes in a 24x24 box; common/services.py)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "options": list(self.options)}


JOB_FIELDS = (
    FormField("name", "jobName", "Job name", "作业名称", "text", "my-job", help="letters, digits, '-', '_', '.', '~'"),
    # a choice of the virtual clusters the user may submit to: the cluster's answer, put in by vc_field
    FormField("vc", "virtualCluster", "Virtual cluster", "虚拟集群", "choice", "default", help="where the job runs"),
    FormField(
        "gpu_type", "gpuType", "GPU type", "显卡类型", "text", "", optional=True, placeholder="any", help="empty: any"
    ),
    FormField("image", "image", "Image", "镜像", "text", "python:3.11", help="the Docker image every task runs"),
    FormField(
        "max_run",
        "extras.maxRunTimeMinutes",
        "Max run time (minutes, 0: none)",
        "工作时长（分钟）",
        "minutes",
        0,
        optional=True,
        help="the job is stopped once it has run this long",
    ),
    FormField("retry", "retryCount", "Retry count", "重试次数", "number", 0, pro=True),
    FormField(
        "env",
        "jobEnvs",
        "Environment",
        "环境变量",
        "pairs",
        "",
        pro=True,
        optional=True,
        placeholder="KEY=value, one a line",
    ),
    FormField(
        "storages",
        "extras.storages",
        "Storage mounts",
        "存储配置",
        "storages",
        "",
        pro=True,
        optional=True,
        placeholder="storage-name:/mnt/path, one a line",
    ),
)


def plugin_fields() -> tuple[FormField, ...]:
    """The runtime plugins (extras.com.microsoft.pai.runtimeplugin) a switch turns on, in basic and pro mode: a
    switch per service of the catalogue that has one (common/services.py), each followed by the plugin parameters
    edited beside it (their ``path``: ``<plugin>.parameters.<name>``, shown while the switch is on)."""
    out: list[FormField] = []
    for s in services.CATALOGUE:  # (read when called: a test adds a service)
        if s.switch is None:
            continue
        out.append(
            FormField(s.name, s.name, s.title, s.switch.label_zh, "switch", False, help=s.switch.help, icon=s.icon)
        )
        for p in s.switch.params:
            path = f"{s.name}.parameters.{p.name}"
            out.append(
                FormField(p.key, path, p.label, p.label_zh, "text", "", optional=True, placeholder=p.placeholder)
            )
    return tuple(out)


ROLE_FIELDS = (
    FormField("name", "name", "Task role name", "任务名称", "text", "main", help="letters, digits, '.', '_', '~'"),
    FormField("command", "command", "Command", "命令", "area", DEFAULT_COMMAND, help="a shell script"),
    FormField("shm", "shmMB", "Shared memory (MB)", "共享内存（MB）", "number", 64),
    FormField("cpu", "cpuNumber", "CPUs", "CPU 数量", "number", 1),
    # basic: how much memory a job needs is a new user's first question (the default, 1024, is often too little)
    FormField("memory", "memoryMB", "Memory (MB)", "内存（MB）", "number", 1024),
    FormField("gpu", "gpuNumber", "GPUs", "GPU 数量", "number", 0),
    FormField(
        "ports",
        "portList",
        "Exposed ports",
        "对外端口",
        "ports",
        "",
        optional=True,
        placeholder="http:1, ssh:1",
        help="label:count",
    ),
    FormField("instances", "taskNumber", "Instances", "实例数", "number", 1, pro=True, help="identical tasks"),
    FormField(
        "min_failed",
        "minFailedTaskCount",
        "Min failed tasks",
        "失败任务数下限",
        "number",
        1,
        pro=True,
        optional=True,
        help="failed tasks that fail the job; 0: never",
    ),
    FormField(
        "min_succeeded",
        "minSucceededTaskCount",
        "Min succeeded tasks",
        "成功任务数下限",
        "number",
        0,
        pro=True,
        optional=True,
        help="succeeded tasks that end the job; 0: all",
    ),
)


def vc_field(vcs: Sequence[str] | None, why: str = "") -> FormField:
    """The virtual cluster field: a choice of ``vcs`` (those the user may submit to), ``default`` picked when it is
    one of them; when the list could not be fetched (``vcs`` None or empty), the text box with a note saying why."""
    field = next(f for f in JOB_FIELDS if f.key == "vc")
    if not vcs:
        reason = why or "the cluster names no virtual cluster for this user"
        note = f"The list of virtual clusters could not be fetched ({reason}): type the name."
        return replace(field, kind="text", note=note)
    options = tuple(dict.fromkeys(vcs))
    picked = field.default if field.default in options else options[0]
    return replace(field, kind="choice", options=options, default=picked)


def job_fields(vcs: Sequence[str] | None, why: str = "") -> tuple[FormField, ...]:
    """JOB_FIELDS with the virtual cluster field ``vc_field`` makes of the cluster's answer."""
    return tuple(vc_field(vcs, why) if f.key == "vc" else f for f in JOB_FIELDS)


def definition(vcs: Sequence[str] | None = None, why: str = "") -> dict[str, Any]:
    """The whole definition as JSON (what the server hands the Lab form), with the user's virtual clusters."""
    return {
        "pluginKey": PLUGIN_KEY,
        "job": [f.to_dict() for f in job_fields(vcs, why)],
        "plugins": [f.to_dict() for f in plugin_fields()],
        "role": [f.to_dict() for f in ROLE_FIELDS],
    }


_JOB_KEYS = {f.path.removeprefix("extras."): f.key for f in JOB_FIELDS} | {"name": "name"}
_ROLE_KEYS = {f.path: f.key for f in ROLE_FIELDS}
_ROLE_PATH = re.compile(r"^taskRoles\[(\d+)\](?:\.(\w+))?")


def locate(path: str) -> tuple[int | None, str | None]:
    """(role index or None for the job, the field's key) a problem path is about; (None, None) if no field is."""
    path = v1_path(path)  # a model path (a conversion's, a builder's) as the v1 key the form's document uses
    m = _ROLE_PATH.match(path)
    if m:
        return int(m.group(1)), _ROLE_KEYS.get(m.group(2), "name" if m.group(2) is None else None)
    if path.startswith("extras."):
        rest = path[len("extras.") :]
        if rest.startswith(PLUGIN_KEY):
            return None, "plugins"
        return None, _JOB_KEYS.get(re.split(r"[.\[]", rest, maxsplit=1)[0])
    return None, _JOB_KEYS.get(re.split(r"[.\[]", path, maxsplit=1)[0])


def field_id(path: str) -> str:
    """The field a problem is shown beside, as the Lab form names it ("name", "roles.0.memory"), or ""."""
    index, key = locate(path)
    if key is None:
        return ""
    return key if index is None else f"roles.{index}.{key}"


_NO_VC = re.compile(r"virtual cluster '[^']*' does not exist")


def refusal_path(message: str) -> str:
    """The field a cluster's refusal without a path is about: an unknown virtual cluster is the
    "Virtual cluster" field's; what does not fit (CPUs, memory, GPUs) is the job's as a whole ("")."""
    return "virtualCluster" if _NO_VC.search(message) else ""
