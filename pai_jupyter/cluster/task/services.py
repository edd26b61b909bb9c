"""Services inside a task, from OpenPAI runtime plugins (the catalogue: common/services.py): how each starts.

Each runs in the background on a port allocated to its task (a port label named after it, so clones never
fight over a fixed port — OpenPAI #5721), started before the user's command without delaying it (#5555).
TensorBoard watches the plugin's logdir, else PAI_OUTPUT_LOGS (every job has it: ``<job dir>/output/logs``,
``/pai/output/logs`` in containers, ``/ml/output/logs`` for Estimator jobs). Each service gets a random token, in
the task's environment (not on a command line), which the proxy in the user's Jupyter server sends: Jupyter takes it
as its own token, TensorBoard runs behind a guard that wants it (``TENSORBOARD_GUARD``). Jupyter's base path is the
one the proxy forwards: /pai/jobs/{user}~{name}/{role}/{index}/jupyter/, and it opens JupyterLab (else Notebook's
tree) where the task has it.
"""

from __future__ import annotations

import secrets
import shlex
import socket
from collections.abc import Callable
from typing import Any

from ...common import services as catalogue
from ...common import tensorboard_guard
from ...common.routes import service_route, service_tasks
from ...protocol import Job
from ..runtime import taskdir
from . import desktop, sshd

SERVICES = tuple(s.name for s in catalogue.CATALOGUE if not s.every_task)  # the tasks their plugin names
BIND = taskdir.SERVICE_HOST


def planned(job: Job) -> dict[tuple[str, int], dict[str, dict[str, Any]]]:
    """Which tasks run which service, with the plugin's parameters: the first role's task 0 unless the plugin
    names ``taskRole`` and/or ``allTasks: true``."""
    out: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    roles = [(r.name, r.instances) for r in job.task_roles]
    for plugin in job.runtime_plugins:
        name = plugin.get("plugin")
        if name not in SERVICES:
            continue
        params = plugin.get("parameters") or {}
        for task in service_tasks(params, roles):
            out.setdefault(task, {})[name] = params
    for task, more in sshd.planned(job).items():  # ssh: every task
        out.setdefault(task, {}).update(more)
    return out


def ports_wanted(job: Job) -> int:
    """The ports one attempt of ``job`` takes from the runtime's range: its roles' labelled ports (but those at a
    ``beginAt`` of their own) and one per service a task runs."""
    labelled = sum(p.count * r.instances for r in job.task_roles for p in r.ports if not p.begin_at)
    return labelled + sum(len(names) for names in planned(job).values())


def base_path(user: str, job_name: str, role: str, idx: int, service: str) -> str:
    """Where the service serves: under its route on the Jupyter server where it knows it (Jupyter), else "/"."""
    s = catalogue.by_name(service)
    return service_route("/", user, job_name, role, idx, service) if s is not None and s.routed else "/"


def wants_token(service: str) -> bool:
    s = catalogue.by_name(service)
    return s is not None and s.token


def new_token() -> str:
    return secrets.token_hex(24)


# TensorBoard has no auth of its own: a task's runs behind the one token guard (common/tensorboard_guard.py),
# its source run with ``python3 -c`` (the task may not have pai_jupyter).
TENSORBOARD_GUARD = tensorboard_guard.source()


JUPYTER_DIRS = (
    'pai_j="$PAI_TASK_DIR/run/jupyter"; (umask 077; mkdir -p "$pai_j/workspaces" "$pai_j/settings" "$pai_j/runtime"); '
    'JUPYTERLAB_WORKSPACES_DIR="$pai_j/workspaces" JUPYTERLAB_SETTINGS_DIR="$pai_j/settings" '
    'JUPYTER_RUNTIME_DIR="$pai_j/runtime" '
)


def token_env(own: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The task's environment entries that carry its services' tokens (never a command line: ``ps`` shows
    those to every local user; a process's environment only to its own account)."""
    return {f"PAI_SERVICE_TOKEN_{name.upper()}": info["token"] for name, info in own.items() if info.get("token")}


def tensorboard(info: dict[str, Any]) -> str:
    port, params = info["port"], info.get("parameters") or {}
    logdir = params.get("logdir")
    if isinstance(logdir, dict):  # OpenPAI's {name: path}
        target = "--logdir_spec " + shlex.quote(",".join(f"{k}:{v}" for k, v in logdir.items()))
        prepare = ""
    else:
        path = shlex.quote(str(logdir)) if logdir else '"${PAI_OUTPUT_LOGS:-$PAI_TASK_DIR/run/tensorboard}"'
        target, prepare = f"--logdir {path}", f"mkdir -p {path}; "
    serve = (
        f"exec python3 -c {shlex.quote(TENSORBOARD_GUARD)}" if info.get("token") else "exec tensorboard"
    )  # a token is always given (core/launching.py); older rows had none
    return f"{prepare}{serve} {target} --port {port} --host {BIND} --reload_interval 5"


def jupyter(info: dict[str, Any]) -> str:
    # the link opens JupyterLab (or Notebook 7's tree) where the task has it, not the bare server's page; its
    # workspaces, settings and runtime files are the task's own (under run/), not those of the HOME it may
    # share with the user's other Labs, whose open documents it would otherwise restore
    token = 'JUPYTER_TOKEN="$PAI_SERVICE_TOKEN_JUPYTER" ' if info.get("token") else ""
    return (
        "if command -v jupyter-lab >/dev/null 2>&1; then open=/lab; "
        "elif command -v jupyter-notebook >/dev/null 2>&1; then open=/tree; else open=; fi; "
        f"{JUPYTER_DIRS}{token}exec jupyter server --no-browser --allow-root --ip={BIND} --port={info['port']} "
        f"--ServerApp.port_retries=0 --ServerApp.base_url={shlex.quote(info['basePath'])} "
        '--ServerApp.root_dir="$PWD" ${open:+--ServerApp.default_url=$open}'
    )


# How each service of the catalogue (common/services.py) starts: the shell that runs it in the foreground on
# ``info["port"]`` (``info``: the task's ``services`` entry: port, parameters, token, basePath)
START: dict[str, Callable[[dict[str, Any]], str]] = {
    "ssh": sshd.command,
    "tensorboard": tensorboard,
    "jupyter": jupyter,
    "desktop": desktop.command,
}


def start_command(service: str, info: dict[str, Any]) -> str:
    """The shell that starts a service in the background and records its pid in the task dir."""
    cmd = START[service](info)
    entry = catalogue.by_name(service)
    if entry is not None and entry.starts == "tools":  # the platform's Python services: say when they cannot run
        cmd = f"{_tools_check(service)}{cmd}"
    log, pid = (taskdir.in_shell(taskdir.service_file(service, kind)) for kind in ("log", "pid"))
    running = f'{{ [ -f {pid} ] && kill -0 "$(cat {pid})" 2>/dev/null; }}'  # already up: a no-op
    # the platform's services find the workbench's tools (process runtime); the user's commands never do
    tools = f'PATH="${{{taskdir.SERVICE_BIN}:+${taskdir.SERVICE_BIN}:}}$PATH"; '
    return f"{running} || {{ ( {tools}{cmd} ) >>{log} 2>&1 & echo $! >{pid}; }}"


def _tools_check(service: str) -> str:
    """Shell: the workbench's Python must be runnable by the task's account, else the service's ``.missing``
    says why and what the admin sets (a Python under root's private home is not, for other accounts)."""
    missing = taskdir.in_shell(taskdir.service_file(service, "missing"))
    why = (
        f"{service} cannot start: the Python environment of the platform's services ($PAI_SERVICE_BIN) cannot be "
        "run by this task's account ($(id -un)); the cluster's admin sets PAI_JUPYTER_TASK_TOOLS to a Python "
        f"environment with {service} that every account can use"
    )
    unusable = '[ -n "${PAI_SERVICE_BIN:-}" ] && [ ! -x "$PAI_SERVICE_BIN/python3" ]'
    return f'if {unusable}; then echo "{why}" >{missing}; exit 127; fi; '


def tensorboard_logdir(params: dict[str, Any], env: dict[str, str]) -> str:
    """Where a task's TensorBoard looks, as its task sees it: the plugin's ``logdir`` (``name:path,...`` for
    OpenPAI's mapping), else the job's ``PAI_OUTPUT_LOGS``."""
    logdir = params.get("logdir")
    if isinstance(logdir, dict):
        return ",".join(f"{k}:{v}" for k, v in logdir.items())
    return str(logdir) if logdir else env.get("PAI_OUTPUT_LOGS") or f"{env.get('PAI_TASK_DIR', '')}/run/tensorboard"


def stop_command(service: str) -> str:
    pid = taskdir.in_shell(taskdir.service_file(service, "pid"))
    return f"kill $(cat {pid}) 2>/dev/null; rm -f {pid}"


def supervisor(own: dict[str, dict[str, Any]]) -> str:
    """Shell to put before the user's command: start each service, then a small loop (in the background, in the
    task's process group, cgroup or container) that starts or stops a service when the daemon leaves a
    ``service-<name>.request`` file saying so in the task dir — how idle services are culled and revived. The
    request is root's (the task can read it, not change it): ``<action> <serial>``, acted on once per serial."""
    cases = "".join(
        f"      {name}:start) {start_command(name, info)} ;;\n      {name}:stop) {stop_command(name)} ;;\n"
        for name, info in own.items()
    )
    loop = (
        "( set +o errexit; while sleep 0.5; do\n"
        f'  for f in "$PAI_TASK_DIR"/{taskdir.service_request_glob()}; do\n'
        '    [ -f "$f" ] || continue\n'
        '    name=${f##*/service-}; name=${name%.request}; read -r action serial < "$f" || continue\n'
        '    eval "seen=\\${seen_$name-}"; [ "$seen" = "$serial" ] && continue; eval "seen_$name=\\$serial"\n'
        '    case "$name:$action" in\n' + cases + "    esac\n  done\ndone ) >/dev/null 2>&1 &"
    )
    ssh = own.get("ssh")
    return "\n".join(
        [
            *([sshd.prelude(ssh)] if ssh else []),
            *(start_command(n, info) for n, info in own.items()),
            loop,
            *([sshd.barrier(ssh)] if ssh else []),
        ]
    )


def answers(host: str, port: int, timeout: float = 0.05) -> bool:
    """Is something listening there (the service is up)?"""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
