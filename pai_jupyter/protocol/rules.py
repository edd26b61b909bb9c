"""Field rules the model and the wire schemas share: name patterns, bounds, versions, and the ``extras`` keys this
product reads. Rules between fields are in ``checks.py``."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, TypeGuard

from pydantic import BeforeValidator, Field, StringConstraints

from ..common.services import names as service_names
from .errors import Problem, type_name

DEFAULT_IMAGE_PREREQ = "default"  # the name of the image prerequisite a v1 job's or a builder's image becomes
V1_JOB_NAME = r"^[A-Za-z0-9\-._~]+$"
V2_JOB_NAME = r"^[a-zA-Z0-9_-]+$"
V1_ROLE_NAME = r"^[A-Za-z0-9._~]+$"
V2_ROLE_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
PORT_LABEL = r"^[A-Za-z0-9._~]+$"
V2_PORT_LABEL = r"^[A-Za-z_][A-Za-z0-9_]*$"  # OpenPAI's server: a C identifier (v1 labels are looser)
ENV_KEY = r"^\w+$"
EXTRAS_KEY = r"^[A-Za-z0-9._]+$"

V1JobName = Annotated[str, StringConstraints(pattern=V1_JOB_NAME)]
V2JobName = Annotated[str, StringConstraints(pattern=V2_JOB_NAME, max_length=255)]
# A role name is part of each task's directory name (a<attempt>.<role>-<index>.t<retry>), which the file system
# limits to 255 bytes; OpenPAI sets no limit of its own. (v1 role names are ASCII.)
MAX_ROLE_NAME = 200
V1RoleName = Annotated[str, StringConstraints(pattern=V1_ROLE_NAME, max_length=MAX_ROLE_NAME)]
V2RoleName = Annotated[str, StringConstraints(pattern=V2_ROLE_NAME, max_length=MAX_ROLE_NAME)]
PortLabel = Annotated[str, StringConstraints(pattern=PORT_LABEL)]
V2PortLabel = Annotated[str, StringConstraints(pattern=V2_PORT_LABEL)]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
# Bounds both the model and the wire schemas type their fields with (one definition, one message).
Count = Annotated[int, Field(ge=1)]  # instances, cpu, port counts, min failed / succeeded
NonNegative = Annotated[int, Field(ge=0)]  # gpu, shared memory, retry counts, a port's first number
MemoryMB = Annotated[int, Field(ge=100)]


def version_ok(value: Any) -> bool:
    """A job's or a prerequisite's ``version`` is a string or a number (OpenPAI's base schema), or absent."""
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def _version(value: Any) -> Any:
    if version_ok(value):
        return value
    raise ValueError(version_message(value))


def version_message(value: Any) -> str:
    return f"must be a string or a number, got {type_name(value)}"


Version = Annotated[str | int | float | None, BeforeValidator(_version)]

RUNTIME_PLUGIN_KEY = "com.microsoft.pai.runtimeplugin"
# the in-task services of the catalogue (common/services.py), then the plugins that only prepare the task
RUNTIME_PLUGINS = (*service_names(), "cmd", "git", "teamwise_storage")
MAX_RUN_TIME_KEY = "maxRunTimeMinutes"
MAX_RUN_TIME_MINUTES = 366 * 24 * 60  # a year: a limit, not "forever" (leave the key out for no limit)


def run_time_problem(minutes: object) -> str | None:
    """Why ``minutes`` is not a max run time (None when it is): one rule and one message for the job document,
    the daemon's REST route and the Lab's "Set work duration"."""
    if (
        isinstance(minutes, bool)
        or not isinstance(minutes, (int, float))
        or not math.isfinite(minutes)
        or not 0 < minutes <= MAX_RUN_TIME_MINUTES
    ):
        return f"{minutes!r} must be a number of minutes above 0 and at most {MAX_RUN_TIME_MINUTES} (a year)"
    return None


LEASE_KEY = "com.pai_jupyter.lease"  # {"seconds": N, "reason": "..."}: see cluster/http/lease.py
MAX_LEASE_SECONDS = 24 * 3600
MAX_LEASE_REASON = 200


def lease_problem(lease: object) -> str | None:
    """Why ``lease`` is not a job's lease (None when it is): its holder renews it within ``seconds`` or the job is
    stopped with ``reason``."""
    if not isinstance(lease, dict) or set(lease) - {"seconds", "reason"}:
        return 'must be a mapping {"seconds": N, "reason": "..."}'
    seconds, reason = lease.get("seconds"), lease.get("reason", "")
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or not 1 <= seconds <= MAX_LEASE_SECONDS
    ):
        return f"seconds: {seconds!r} must be a number from 1 to {MAX_LEASE_SECONDS} (a day)"
    if not isinstance(reason, str) or len(reason) > MAX_LEASE_REASON:
        return f"reason must be a string of at most {MAX_LEASE_REASON} characters"
    return None


PREEMPTION_KEY = "preemption"  # {"graceSeconds": N, "signal": "TERM"}: how a task is told it is preempted
PREEMPT_SIGNALS = ("TERM", "INT", "USR1", "USR2", "HUP")
MAX_PREEMPT_GRACE_SECONDS = 3600


def preemption_problem(spec: object) -> str | None:
    """What is wrong with a job's ``extras.preemption``, or None (see docs/queue.md, "Preemption")."""
    if not isinstance(spec, dict):
        return "must be a mapping with graceSeconds and/or signal"
    unknown = sorted(set(spec) - {"graceSeconds", "signal"})
    if unknown:
        return f"unknown key(s) {', '.join(map(repr, unknown))}: only graceSeconds and signal"
    grace = spec.get("graceSeconds")
    if grace is not None and (
        not isinstance(grace, (int, float)) or isinstance(grace, bool) or not 0 <= grace <= MAX_PREEMPT_GRACE_SECONDS
    ):
        return f"graceSeconds: {grace!r} must be a number from 0 to {MAX_PREEMPT_GRACE_SECONDS}"
    sig = spec.get("signal")
    if sig is not None and sig not in PREEMPT_SIGNALS:
        return f"signal: {sig!r} must be one of {', '.join(PREEMPT_SIGNALS)} (without SIG)"
    return None


ESTIMATOR_KEY = "com.pai_jupyter.estimator"
NOTIFY_KEY = "jobStatusChangeNotification"
# OpenPAI's keys in it, by the job state (RETRIED: a new attempt) each one asks to hear of; ``webhook`` is ours
NOTIFY_STATES = {
    "RUNNING": "running",
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "STOPPED": "stopped",
    "RETRIED": "retried",
}
CHANNEL = re.compile(r"^[A-Za-z0-9_]+$")
SCALAR = (str, int, float, bool)


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_extras(extras: Any, path: str) -> list[Problem]:
    """Rules for the ``extras`` keys this product understands; other keys pass through untouched."""
    if not isinstance(extras, dict):
        return []
    out: list[Problem] = []
    plugins = extras.get(RUNTIME_PLUGIN_KEY)
    if plugins is not None:
        ppath = f"{path}.{RUNTIME_PLUGIN_KEY}"
        if not isinstance(plugins, list):
            out.append(Problem(ppath, "must be a list of {plugin, parameters} entries"))
        else:
            seen: set[str] = set()
            for i, entry in enumerate(plugins):
                epath = f"{ppath}[{i}]"
                if not isinstance(entry, dict):
                    out.append(Problem(epath, "must be a mapping with a 'plugin' name"))
                    continue
                name = entry.get("plugin")
                if name not in RUNTIME_PLUGINS:
                    out.append(
                        Problem(
                            f"{epath}.plugin",
                            f"{name!r} is not a known runtime plugin (one of {', '.join(RUNTIME_PLUGINS)})",
                        )
                    )
                elif name in seen and name != "cmd":
                    out.append(Problem(f"{epath}.plugin", f"the {name} plugin is declared twice"))
                seen.add(str(name))
                params = entry.get("parameters", {})
                if params is not None and not isinstance(params, dict):
                    out.append(Problem(f"{epath}.parameters", "must be a mapping"))
                elif name == "tensorboard" and isinstance(params, dict) and "port" in params:
                    port = params["port"]
                    if not is_int(port) or not 1 <= port <= 65535:
                        out.append(Problem(f"{epath}.parameters.port", f"{port!r} is not a port number (1..65535)"))
                elif name == "ssh" and isinstance(params, dict):
                    out += check_ssh_plugin(params, f"{epath}.parameters")
                policy = entry.get("failurePolicy")
                if policy is not None and policy not in ("ignore", "fail"):
                    out.append(Problem(f"{epath}.failurePolicy", f"{policy!r} must be 'ignore' or 'fail'"))
    gang = extras.get("gangAllocation")
    if gang is not None and not isinstance(gang, bool):
        out.append(Problem(f"{path}.gangAllocation", "must be true or false"))
    storages = extras.get("storages")
    if storages is not None:
        if not isinstance(storages, list):
            out.append(Problem(f"{path}.storages", "must be a list of {name, mountPath} entries"))
        else:
            for i, entry in enumerate(storages):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    out.append(Problem(f"{path}.storages[{i}]", "must be a mapping with a string 'name'"))
    limit = extras.get(MAX_RUN_TIME_KEY)
    if limit is not None and (problem := run_time_problem(limit)):
        out.append(Problem(f"{path}.{MAX_RUN_TIME_KEY}", problem))
    lease = extras.get(LEASE_KEY)
    if lease is not None and (problem := lease_problem(lease)):
        out.append(Problem(f"{path}.{LEASE_KEY}", problem))
    preemption = extras.get(PREEMPTION_KEY)
    if preemption is not None and (problem := preemption_problem(preemption)):
        out.append(Problem(f"{path}.{PREEMPTION_KEY}", problem))
    out += check_estimator(extras.get(ESTIMATOR_KEY), f"{path}.{ESTIMATOR_KEY}")
    out += check_notification(extras.get(NOTIFY_KEY), f"{path}.{NOTIFY_KEY}")
    return out


def check_notification(spec: Any, path: str) -> list[Problem]:
    """OpenPAI's map of changes to booleans, and the webhook the daemon POSTs them to (an http(s) URL)."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        return [Problem(path, f"must be a mapping of {', '.join(NOTIFY_STATES.values())} to true or false")]
    out = [
        Problem(f"{path}.{k}", "must be true or false")
        for k in NOTIFY_STATES.values()
        if k in spec and not isinstance(spec[k], bool)
    ]
    hook = spec.get("webhook")
    if hook is not None and (not isinstance(hook, str) or not re.match(r"^https?://[^\s/]+", hook)):
        out.append(Problem(f"{path}.webhook", "must be an http:// or https:// URL"))
    return out


SSH_PUBLIC_KEY = r"^(ssh-[a-z0-9-]+|ecdsa-sha2-[a-z0-9-]+|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+={0,3}( [^\r\n]*)?$"


def check_ssh_plugin(params: dict[str, Any], path: str) -> list[Problem]:
    """The ssh plugin's parameters (OpenPAI's: jobssh, sshbarrier, sshbarrierTimeout, userssh {custom, keys})."""
    out = [
        Problem(f"{path}.{k}", "must be true or false")
        for k in ("jobssh", "sshbarrier")
        if k in params and params[k] not in (True, False, "true", "false")
    ]
    timeout = params.get("sshbarrierTimeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        out.append(Problem(f"{path}.sshbarrierTimeout", f"{timeout!r} must be a number of minutes above 0"))
    userssh = params.get("userssh")
    if userssh is not None:
        if not isinstance(userssh, dict):
            out.append(Problem(f"{path}.userssh", "must be a mapping {type: custom, value: <public keys>}"))
        else:
            if userssh.get("type", "custom") != "custom":
                out.append(Problem(f"{path}.userssh.type", "must be 'custom' (the value holds the public keys)"))
            value = userssh.get("value", "")
            lines = [line.strip() for line in value.splitlines() if line.strip()] if isinstance(value, str) else None
            if lines is None or not all(re.match(SSH_PUBLIC_KEY, line) for line in lines):
                out.append(
                    Problem(
                        f"{path}.userssh.value", "must be OpenSSH public keys, one per line: <type> <base64> [comment]"
                    )
                )
    return out


def check_estimator(spec: Any, path: str) -> list[Problem]:
    """The Estimator's layout request: hyperparameters, input channels (paths or URIs) and a source dir."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        return [Problem(path, "must be a mapping of hyperparameters, inputs and sourceDir")]
    out = [
        Problem(f"{path}.{k}", "is not one of hyperparameters, inputs, sourceDir")
        for k in spec
        if k not in ("hyperparameters", "inputs", "sourceDir")
    ]
    hps = spec.get("hyperparameters")
    if hps is not None and not isinstance(hps, dict):
        out.append(Problem(f"{path}.hyperparameters", "must be a mapping of names to values"))
    inputs = spec.get("inputs")
    if inputs is not None:
        if not isinstance(inputs, dict):
            out.append(Problem(f"{path}.inputs", "must be a mapping of channel names to paths or URIs"))
        else:
            for name, value in inputs.items():
                if not CHANNEL.match(str(name)):
                    out.append(Problem(f"{path}.inputs.{name}", "channel names may use letters, digits and '_'"))
                elif not isinstance(value, str) or not value:
                    out.append(Problem(f"{path}.inputs.{name}", "must be a path or URI string"))
    source = spec.get("sourceDir")
    if source is not None and (not isinstance(source, str) or not source):
        out.append(Problem(f"{path}.sourceDir", "must be a directory path"))
    return out


def minutes_text(minutes: float | None) -> str:
    """``1 minute``, ``90 minutes``, ``0.5 minutes``: the words every max-run-time message uses."""
    return f"{minutes or 0:g} minute" + ("" if minutes == 1 else "s")
