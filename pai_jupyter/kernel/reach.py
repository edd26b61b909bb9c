"""How the Jupyter server reaches the kernel of a running PAI job, and what it says when it cannot.

``PaiProvisioner`` (provisioner.py) builds on ``KernelReach``: the job's client, the path to the kernel (directly,
or through an SSH tunnel to the task's sshd, kernelspec ``tunnel``), heartbeat pings until the kernel answers,
and one message with everything known about a job that ended (state, exit code, diagnostics, log tail).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from traitlets import Bool, Enum, Float, Unicode

from ..client.errors import PaiError
from ..common.states import FINAL
from . import jobspec
from .tunnel import MODES, KernelTunnel, TunnelError, open_tunnel, task_ports

if TYPE_CHECKING:
    from ..client import AsyncClient, JobDetail

SSH_NOTE = {
    "never": "the kernelspec says `tunnel: never`, so the Jupyter server must reach the task's host and ports "
    "directly (or reinstall it with `--tunnel auto`)",
    "no-plugin": "no SSH tunnel was tried: the kernelspec turned the job's ssh plugin off (`--no-ssh-plugin`)",
}


class KernelStartError(RuntimeError):
    """The kernel's job could not start, or its kernel never answered: the message says why, with the job's
    state, exit code, diagnostics and the last lines of its log."""


class _NoAnswer(KernelStartError):
    """The kernel's heartbeat did not answer on this path before the deadline."""


class KernelReach(KernelProvisionerBase):
    """The job's client, the path to its kernel and the diagnosis of its end (the base of ``PaiProvisioner``)."""

    profile = Unicode("", config=True, help="Cluster profile; empty = the default profile.")
    image = Unicode(
        "jupyter/base-notebook:latest",
        config=True,
        help="Image of the kernel's task (Docker runtimes and OpenPAI): needs python and ipykernel.",
    )
    python = Unicode(
        "",
        config=True,
        help="Python that runs ipykernel in the task; empty = this Jupyter server's "
        "own python on the embedded cluster's process runtime, else python3.",
    )
    start_timeout = Float(300.0, config=True, help="Seconds to wait for the job to run and its kernel to answer.")
    tunnel = Enum(
        MODES,
        default_value="auto",
        config=True,
        help="How the Jupyter server reaches the kernel's ports: `auto` (directly; through an SSH tunnel to "
        "the task's sshd where a remote task's ports do not answer), `always` (the tunnel; the kernel "
        "binds its task's loopback only), `never` (directly).",
    )
    ssh_plugin = Bool(
        None,
        allow_none=True,
        config=True,
        help="Give the job the ssh runtime plugin (the tunnel needs it). Unset: with `tunnel: always`, "
        "and with `auto` on a remote OpenPAI.",
    )
    identity = Unicode(
        "",
        config=True,
        help="Private key the tunnel logs in with. Empty: the job's key on the "
        "embedded cluster; ~/.ssh/id_ed25519 (id_ecdsa, id_rsa) on OpenPAI, whose public half is put "
        "in the job's userssh.",
    )
    direct_timeout = Float(
        15.0,
        config=True,
        help="With `tunnel: auto`: seconds the direct path is tried, once the job runs, before the SSH tunnel is.",
    )

    job_id: str | None = None
    _client: AsyncClient | None = None
    _is_local: bool | None = None
    _tunnel: KernelTunnel | None = None
    _task_info: dict[str, Any] | None = None  # the kernel's ports in its task (connection_info has the local ones)
    _curve: tuple[bytes, bytes] | None = None  # the CurveZMQ key pair of the kernel's sockets (public, secret)
    _host_key: str | None = None  # the job's sshd's host key, trusted on first use (tunnel.py)
    path = ""  # "direct" or "SSH tunnel via HOST:PORT"

    @property
    def client(self) -> AsyncClient:
        if self._client is None:
            from ..client import AsyncClient

            self._client = AsyncClient(self.profile or None)
        return self._client

    async def _detail(self) -> JobDetail:
        assert self.job_id is not None
        return await self.client.detail(self.job_id)

    async def _log_tail(self) -> str:
        assert self.job_id is not None
        try:
            return await self.client.logs(self.job_id, role=jobspec.ROLE, stream="all", tail=True)
        except PaiError:
            return ""

    def _log(self) -> logging.Logger | Any:
        return getattr(self, "log", logging.getLogger("pai_jupyter.kernel"))

    def _uses_ssh(self) -> bool:
        """Whether the job gets the ssh plugin (what the tunnel logs into)."""
        if self.ssh_plugin is not None:
            return bool(self.ssh_plugin)
        return self.tunnel == "always" or (self.tunnel == "auto" and not self._is_local)

    def _ssh_identity(self) -> str | None:
        if self.identity:
            return os.path.expanduser(self.identity)
        if self._is_local:
            return None  # the job's own key, which the embedded cluster hands its owner
        from ..client.ssh import default_identity

        return default_identity()

    def _public_key(self) -> str | None:
        """The public half of the tunnel's key (``<key>.pub``), for the job's userssh; None when unknown."""
        key = self._ssh_identity()
        if not key:
            return None
        try:
            return Path(f"{key}.pub").read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    async def _connect(self, detail: JobDetail, key: bytes, deadline: float) -> KernelConnectionInfo:
        """Reach the running kernel directly or through the tunnel (kernelspec ``tunnel``); say which in the log."""
        task_info = jobspec.connection_info(detail, key, self._curve)
        assert task_info is not None
        self._task_info = task_info
        if self.tunnel == "never" or (self.tunnel == "auto" and (self._is_local or not self._uses_ssh())):
            await self._until_answering(task_info, deadline)
            return self._use(task_info, "direct")
        kept = self._tunnel is not None and self._tunnel.matches(task_ports(task_info))
        if self.tunnel == "auto" and not kept:  # a remote task: try its ports first (a restart keeps its tunnel)
            try:
                await self._until_answering(task_info, min(deadline, time.monotonic() + self.direct_timeout))
                await self._close_tunnel()
                return self._use(task_info, "direct")
            except _NoAnswer:
                if time.monotonic() > deadline:
                    raise
        try:
            info = await self._open_tunnel(task_info, deadline)
        except TunnelError as exc:
            hint = (
                " (the kernelspec turned it off: reinstall it with --ssh-plugin)"
                if self.ssh_plugin is False and "no ssh plugin" in str(exc)
                else ""
            )
            raise KernelStartError(
                f"the PAI kernel's job {self.job_id} runs, but {exc}{hint}; it was stopped"
            ) from None
        await self._until_answering(info, deadline)
        if self.tunnel == "auto" and await self._answers(task_info, 1000):  # the kernel was only slow to start
            await self._close_tunnel()
            return self._use(task_info, "direct")
        assert self._tunnel is not None
        return self._use(info, f"SSH tunnel via {self._tunnel.via}")

    def _use(self, info: dict[str, Any], path: str) -> KernelConnectionInfo:
        # jupyter_client's TypedDict says ``key: str``, yet its KernelManager compares the key with its session's
        # bytes (_equal_connections), so ours stays bytes: the same dict, typed as jupyter_client's
        self.connection_info = cast(KernelConnectionInfo, info)
        self.path = path
        ports = ", ".join(f"{label} {info[f'{label}_port']}" for label in jobspec.LABELS)
        self._log().info(
            "PAI kernel %s: job %s, kernel reached %s (%s:%s)",
            self.kernel_id,
            self.job_id,
            "directly" if path == "direct" else f"through an {path}",
            info["ip"],
            ports,
        )
        return self.connection_info

    async def _open_tunnel(self, task_info: dict[str, Any], deadline: float) -> dict[str, Any]:
        """The tunnel's connection info: the live tunnel when it still leads to these ports, else a new one that
        asks for the old local ports (connected clients find the restarted kernel)."""
        ports = task_ports(task_info)
        if self._tunnel is not None and self._tunnel.matches(ports):
            return self._tunnel.connection_info(task_info)
        wanted = self._tunnel.local_ports if self._tunnel is not None else {}
        await self._close_tunnel()
        self._tunnel = await open_tunnel(
            self.client,
            str(self.job_id),
            ports,
            identity=self._ssh_identity(),
            deadline=deadline,
            local_ports=wanted,
            host_key=self._host_key,
            log=self._log(),
        )
        self._host_key = self._tunnel.host_key
        return self._tunnel.connection_info(task_info)

    async def _close_tunnel(self) -> None:
        if self._tunnel is not None:
            tunnel, self._tunnel = self._tunnel, None
            await tunnel.close()
            self._log().info("PAI kernel %s: SSH tunnel via %s closed", self.kernel_id, tunnel.via)

    @staticmethod
    async def _answers(info: dict[str, Any], wait_ms: int) -> bool:
        """Whether the kernel's heartbeat at ``info`` echoes a ping within ``wait_ms`` (a CurveZMQ handshake first,
        with the key pair ``info`` carries)."""
        import zmq
        import zmq.asyncio

        sock = zmq.asyncio.Context.instance().socket(zmq.REQ)
        sock.linger = 0
        if info.get("curve_publickey"):  # the kernel's sockets are CurveZMQ servers with this key pair
            sock.curve_serverkey = sock.curve_publickey = info["curve_publickey"].encode("ascii")
            sock.curve_secretkey = info["curve_secretkey"].encode("ascii")
        try:
            sock.connect(f"tcp://{info['ip']}:{info['hb_port']}")
            await sock.send(b"ping")
            if await sock.poll(wait_ms):
                await sock.recv()
                return True
            return False
        finally:
            sock.close()

    async def _until_answering(self, info: dict[str, Any], deadline: float) -> None:
        """Ping the kernel's heartbeat until it echoes; the job ending meanwhile is a start error."""
        wait_ms = 200
        while True:
            if await self._answers(info, wait_ms):
                return
            wait_ms = min(wait_ms * 2, 1000)
            detail = await self._detail()
            if detail.state in FINAL:
                raise KernelStartError(await self._why_ended(detail, "ended before its kernel answered"))
            if time.monotonic() > deadline:
                note = (
                    None
                    if self._is_local or self._tunnel is not None
                    else (
                        SSH_NOTE["never"]
                        if self.tunnel == "never"
                        else SSH_NOTE["no-plugin"]
                        if not self._uses_ssh()
                        else None
                    )
                )
                where = f"; {note}" if note else ""
                via = f" (through the SSH tunnel via {self._tunnel.via})" if self._tunnel is not None else ""
                raise _NoAnswer(
                    f"the PAI kernel's job {self.job_id} runs but its kernel did not answer at {info['ip']}:"
                    f"{info['hb_port']}{via} within {self.start_timeout:g} s{where}; it was stopped. "
                    f"Last lines of its log:\n{_last_lines(await self._log_tail())}"
                )

    async def _why_ended(self, detail: JobDetail, what: str) -> str:
        """One message with everything known about an ended job: state, exit code, diagnostics, log tail."""
        s = detail.job_status
        task = next(iter(detail.role_tasks(jobspec.ROLE)), None)
        code = s.app_exit_code if s.app_exit_code is not None else (task.container_exit_code if task else None)
        diag = (task.container_exit_diagnostics if task else None) or s.app_exit_diagnostics or ""
        tail = _last_lines(await self._log_tail())
        hint = ""
        if "No module named" in tail or "has no ipykernel" in tail or "not found" in tail or code in (126, 127):
            hint = (
                " The task's python could not run ipykernel: the image must have python and ipykernel "
                f"(this kernelspec runs {self.python or 'its python'!s} in image {self.image}); "
                "reinstall the kernelspec with `pai kernel install --image IMAGE --python PYTHON`."
            )
        return (
            f"the PAI kernel's job {self.job_id} {what}: {s.state}, exit code {code}"
            + (f": {diag}" if diag else "")
            + "."
            + hint
            + (f"\nLast lines of its log:\n{tail}" if tail else "")
        )

    async def _reopen_tunnel(self) -> None:
        """The SSH connection dropped while the job runs: open it again on the same local ports."""
        assert self._tunnel is not None and self._task_info is not None
        self._log().warning("PAI kernel %s: SSH tunnel via %s dropped; re-opening it", self.kernel_id, self._tunnel.via)
        try:
            await self._open_tunnel(self._task_info, time.monotonic() + 30)
        except TunnelError as exc:
            self._log().warning("PAI kernel %s: the SSH tunnel could not be re-opened: %s", self.kernel_id, exc)


def _last_lines(text: str, n: int = 20) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-n:])
