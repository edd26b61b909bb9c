"""The job that runs a JupyterHub user's server (PAISpawner): one task, ``jupyterhub-singleuser`` on a port the job
allocates, as the user's account, with the resources picked on the spawn page.

The job is ordinary (the Lab's sidebar, ``pai jobs`` and the queue show it). The Hub's environment for the server
(``JUPYTERHUB_API_TOKEN``, its OAuth client, its URLs) travels as one secret (``secrets.hubEnv``: base64 of shell
``export`` lines), so ``GET …/config`` masks it, the task's command.sh on disk shows it masked, and it reaches the
task's shell only in memory. The server binds to its task's own address (``PAI_CONTAINER_HOST_IP``) and allocated
port, which the task's status reports: the spawner hands the Hub those, so on a batch system's node the Hub's proxy
reaches that node, never an assumed loopback. The job is interactive (GPU-idle release judges it, as it does a
kernel's), and ends at its max run time like any other.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
from dataclasses import dataclass

from ..protocol import Job, TaskRole
from ..protocol.model import DEFAULT_IMAGE_PREREQ, Port, Prerequisite
from ..protocol.rules import MAX_RUN_TIME_KEY

ROLE = "server"
PORT = "http"
EXTRAS_KEY = "com.pai_jupyter.hub"  # {"user": ..., "server": ...}: which Hub server the job is
INTERACTIVE_KEY = "com.pai_jupyter.interactive"  # GPU-idle release judges it (cluster/core/gpuidle.py)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class ServerOptions:
    """What the spawn page's form picked (hub/form.py)."""

    virtual_cluster: str = "default"
    cpu: int = 1
    memory_mb: int = 4096
    gpu: int = 0
    image: str = "python:3.11"
    max_run_minutes: float | None = None


def job_name(server_name: str) -> str:
    """``jupyterhub-<server>-<6 hex>`` (``server`` for the default one): a new name per start, since a job's name is
    its user's for good."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", server_name).strip("_-")[:100] or "server"
    return f"jupyterhub-{stem}-{secrets.token_hex(3)}"


def env_script(env: dict[str, str]) -> str:
    """The environment as base64 of ``export NAME='value'`` lines (names that are not shell names are left out)."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items()) if ENV_NAME.fullmatch(k)]
    return base64.b64encode("\n".join(lines).encode("utf-8")).decode("ascii")


# the user's own home when their account has a writable one (PAM accounts), else the one the cluster keeps for
# them ($PAI_USER_HOME, the task's HOME already): notebooks outlive the server either way
HOME = (
    'h=$(getent passwd "$(id -u)" 2>/dev/null | cut -d: -f6); '
    'if [ -n "$h" ] && [ -d "$h" ] && [ -w "$h" ]; then export HOME="$h"; fi'
)
# the Python with jupyterhub, JupyterLab and pai_jupyter: the one named, else the platform's task tools
# (PAI_SERVICE_BIN on the process runtime), else the image's python3
FIND_PYTHON = (
    'if [ -n "${PAI_HUB_PYTHON:-}" ]; then PY="$PAI_HUB_PYTHON"; '
    'elif [ -x "${PAI_SERVICE_BIN:-/nonexistent}/python3" ]; then PY="$PAI_SERVICE_BIN/python3"; else PY=python3; fi'
)


def commands(python: str | None) -> list[str]:
    port = f"$PAI_PORT_LIST_{ROLE}_0_{PORT}"
    # asked only once the server failed: a probe before it would cost every start a second import of
    # jupyterhub.singleuser (2-3 s on a loaded 2-core machine, the larger part of a warm start on Slurm)
    missing = (
        'code=$?; if ! "$PY" -c "import jupyterhub.singleuser" 2>/dev/null; then echo "[pai_jupyter hub] $PY cannot '
        'run jupyterhub-singleuser (pip install jupyterhub jupyterlab pai_jupyter there; docs/hub.md)" >&2; exit 127; '
        "fi; exit $code"
    )
    return [
        "umask 077",
        "eval \"$(printf %s '<% $secrets.hubEnv %>' | base64 -d)\"",
        *([f"PAI_HUB_PYTHON={shlex.quote(python)}"] if python else []),
        FIND_PYTHON,
        # the server's terminals and kernels find jupyter and pai beside that Python (the user's tools)
        'case "$PY" in /*) PATH="${PY%/*}:$PATH"; export PATH;; esac',
        HOME,
        'cd "$HOME"',
        # where the server listens, as the Hub's proxy reaches it: the task's address and port (IPv6 bracketed)
        f'ip="$PAI_CONTAINER_HOST_IP"; case "$ip" in *:*) host="[$ip]";; *) host="$ip";; esac; port="{port}"',
        'export JUPYTERHUB_SERVICE_URL="http://$host:$port${JUPYTERHUB_SERVICE_PREFIX:-/}"',
        '"$PY" -m jupyterhub.singleuser --ip="$ip" --port="$port" --ServerApp.root_dir="$HOME" '
        "--PaiJupyter.enable_inside_tasks=True || { " + missing + "; }",
    ]


def server_job(
    name: str,
    opts: ServerOptions,
    env: dict[str, str],
    *,
    user: str,
    server_name: str,
    python: str | None = None,
) -> Job:
    """The server's job. ``env``: the server's environment (the Hub's and the spawner's); ``python``: the Python to
    run it with (None: the task tools', else the image's)."""
    role = TaskRole(
        name=ROLE,
        instances=1,
        cpu=opts.cpu,
        memory_mb=opts.memory_mb,
        gpu=opts.gpu,
        ports=[Port(label=PORT, count=1)],
        commands=commands(python),
        min_failed=1,
        min_succeeded=1,
    )
    extras: dict[str, object] = {EXTRAS_KEY: {"user": user, "server": server_name}, INTERACTIVE_KEY: True}
    if opts.max_run_minutes:
        extras[MAX_RUN_TIME_KEY] = opts.max_run_minutes
    return Job(
        name=name,
        task_roles=[role],
        prerequisites=[Prerequisite(name=DEFAULT_IMAGE_PREREQ, type="dockerimage", uri=opts.image)],
        virtual_cluster=opts.virtual_cluster,
        secrets={"hubEnv": env_script(env)},
        extras=extras,
        description=f"JupyterHub server of {user}" + (f" ({server_name})" if server_name else ""),
    )
