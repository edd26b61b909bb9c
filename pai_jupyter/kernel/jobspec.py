"""The one-task job that runs a kernel, and the connection info read back from its task status.

The job is ordinary (``pai jobs``, widgets, labextension show it): one role ``kernel`` with five allocated
ports (shell, iopub, stdin, control, hb) and a command that runs ``launcher.py`` with the kernelspec's python.
The connection key and the CurveZMQ key travel as secrets (``secrets.kernelKey``, ``secrets.kernelCurveKey``):
``GET …/config`` shows them masked, and they reach the task only as environment variables the launcher removes
before the kernel starts. On the embedded cluster the job also declares a lease (``extras["com.pai_jupyter.lease"]``)
that its Jupyter server renews (lease.py); the daemon stops the job when the renewals stop.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zmq.utils import z85

from ..client.models import JobDetail
from ..protocol import Job, TaskRole
from ..protocol.model import DEFAULT_IMAGE_PREREQ, Port, Prerequisite
from ..protocol.rules import LEASE_KEY

ROLE = "kernel"
LABELS = ("shell", "iopub", "stdin", "control", "hb")
EXTRAS_KEY = "com.pai_jupyter.kernel"
WORKDIR_PREREQ = "notebook_dir"
_LAUNCHER = (Path(__file__).with_name("launcher.py")).read_text(encoding="utf-8")


@dataclass
class KernelJobOptions:
    """What a kernelspec asks for (``metadata.kernel_provisioner.config``)."""

    python: str = "python3"
    image: str = "python:3.11"
    cpu: int = 1
    memory_mb: int = 4096
    gpu: int = 0
    virtual_cluster: str = "default"


def job_name(notebook: str | None, cwd: str | None) -> str:
    """``<notebook stem>-kernel-<6 hex>``: named after the notebook (or its folder), unique per start."""
    stem = Path(notebook).stem if notebook else (Path(cwd).name if cwd else "")
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_-")[:200] or "notebook"
    return f"{stem}-kernel-{secrets.token_hex(3)}"


def launcher_command(python: str) -> str:
    """The python launcher as one shell line (base64: a job's commands are trimmed line by line)."""
    code = base64.b64encode(_LAUNCHER.encode("utf-8")).decode("ascii")
    boot = f"import base64;exec(compile(base64.b64decode('{code}'),'pai_kernel_launcher','exec'))"
    return f"exec {shlex.quote(python)} -c {shlex.quote(boot)}"


def kernel_job(
    name: str,
    key: str,
    opts: KernelJobOptions,
    *,
    curve_secret: bytes,
    kernel_name: str,
    workdir: str | None,
    bind_ip: str,
    ports: dict[str, int] | None = None,
    ssh: dict[str, Any] | None = None,
    lease: dict[str, Any] | None = None,
) -> Job:
    """The kernel's job. ``curve_secret``: the CurveZMQ secret key (Z85) of the kernel's sockets. ``workdir``: a
    host directory the task starts in (the embedded cluster's owner only: it is given as the role's output so a
    Docker task gets it mounted at the same path). ``ports``: the ports wanted (a new job after a restart asks for
    the old job's, so connected clients find the new kernel; the embedded cluster gives the next free one where a
    port is taken). ``ssh``: the ssh runtime plugin's parameters (the SSH tunnel logs into the task's sshd); None:
    no plugin. ``lease``: the job's lease (lease.py); None: none (a remote OpenPAI)."""
    commands = [
        "umask 077",
        f"export PAI_KERNEL_KEY={shlex.quote('<% $secrets.kernelKey %>')}",
        f"export PAI_KERNEL_CURVE_KEY={shlex.quote('<% $secrets.kernelCurveKey %>')}",
        f"export PAI_KERNEL_IP={shlex.quote(bind_ip)} PAI_KERNEL_NAME={shlex.quote(kernel_name)}",
    ]
    prereqs: list[Prerequisite] = []
    if workdir:
        q = shlex.quote(workdir)
        commands.append(f'cd {q} || echo "[pai_jupyter kernel] cannot enter {workdir}; the kernel runs in $PWD"')
        prereqs.append(Prerequisite(name=WORKDIR_PREREQ, type="output", uri=workdir))
    commands.append(launcher_command(opts.python))
    wanted = [Port(label=label, count=1, begin_at=(ports or {}).get(label, 0)) for label in LABELS]
    role = TaskRole(
        name=ROLE,
        instances=1,
        cpu=opts.cpu,
        memory_mb=opts.memory_mb,
        gpu=opts.gpu,
        ports=wanted,
        commands=commands,
        output=WORKDIR_PREREQ if workdir else None,
        min_failed=1,
        min_succeeded=1,
    )
    extras: dict[str, Any] = {EXTRAS_KEY: {"kernelName": kernel_name, "python": opts.python}}
    if lease is not None:
        extras[LEASE_KEY] = lease
    if ssh is not None:
        extras["com.microsoft.pai.runtimeplugin"] = [{"plugin": "ssh", "parameters": ssh}]
    image = Prerequisite(name=DEFAULT_IMAGE_PREREQ, type="dockerimage", uri=opts.image)  # what roles use by default
    return Job(
        name=name,
        task_roles=[role],
        prerequisites=[image, *prereqs],
        virtual_cluster=opts.virtual_cluster,
        secrets={"kernelKey": key, "kernelCurveKey": z85.decode(curve_secret).hex()},
        extras=extras,
        description=f"Jupyter kernel {kernel_name}",
    )


def ssh_parameters(public_key: str | None) -> dict[str, Any]:
    """The ssh plugin's parameters for a kernel's job: no jobssh (one task); ``userssh`` lets in the key the
    tunnel logs in with, as OpenPAI's portal does with a user's key."""
    params: dict[str, Any] = {"jobssh": False}
    if public_key:
        params["userssh"] = {"type": "custom", "value": public_key}
    return params


def connection_info(
    detail: JobDetail, key: bytes, curve: tuple[bytes, bytes] | None = None, *, host: str | None = None
) -> dict[str, Any] | None:
    """The KernelManager's connection info from the running task's host and ports, with the CurveZMQ keys
    ``curve`` (public, secret) when given; None until all ports are known."""
    tasks = detail.role_tasks(ROLE)
    if not tasks or not tasks[0].container_ip:
        return None
    ports = tasks[0].container_ports or {}
    info: dict[str, Any] = {
        "ip": host or tasks[0].container_ip,
        "transport": "tcp",
        "signature_scheme": "hmac-sha256",
        "key": key,
    }
    if curve is not None:  # as the KernelManager's own connection info has them: Z85 text
        info["curve_publickey"], info["curve_secretkey"] = (k.decode("ascii") for k in curve)
    for label in LABELS:
        value = ports.get(label)
        first = value[0] if isinstance(value, list) and value else value
        if first in (None, ""):
            return None
        info[f"{label}_port"] = int(str(first).split(",")[0])
    return info
