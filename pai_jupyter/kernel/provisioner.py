"""``PaiProvisioner``: jupyter_client's kernel provisioner that runs the kernel as a one-task PAI job.

Start submits the job (see jobspec.py), waits for its task to run and its heartbeat to answer, and hands the
KernelManager the task's host and ports with the manager's own key. Interrupts are control-channel messages
(the kernelspec's ``interrupt_mode: message``), so no signal has to reach the task. A restart keeps the job when
it is alive (the launcher in the task starts a fresh kernel on the same ports), else submits a new one. Shutdown
and Jupyter's idle culling stop the job; a job that ends on its own is reported with its exit code, diagnostics
and the last lines of its log. Progress of a requested shutdown is read from the launcher's log lines.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from traitlets import Bool, Enum, Float, Int, Unicode

from ..client.errors import PaiError
from ..common.states import FINAL
from . import jobspec
from .jobspec import KernelJobOptions
from .tunnel import MODES, KernelTunnel, TunnelError, open_tunnel, task_ports

TAG = "[pai_jupyter kernel]"
SSH_NOTE = {"never": "the kernelspec says `tunnel: never`, so the Jupyter server must reach the task's host and ports "
                      "directly (or reinstall it with `--tunnel auto`)",
            "no-plugin": "no SSH tunnel was tried: the kernelspec turned the job's ssh plugin off (`--no-ssh-plugin`)"}


class KernelStartError(RuntimeError):
    """The kernel's job could not start, or its kernel never answered: the message says why, with the job's
    state, exit code, diagnostics and the last lines of its log."""


class _NoAnswer(KernelStartError):
    """The kernel's heartbeat did not answer on this path before the deadline."""


class PaiProvisioner(KernelProvisionerBase):  # type: ignore[misc]
    """Runs the kernel as a PAI job (kernelspec ``metadata.kernel_provisioner.provisioner_name: pai-provisioner``)."""

    profile = Unicode("", config=True, help="Cluster profile; empty = the default profile.")
    image = Unicode("jupyter/base-notebook:latest", config=True,
                    help="Image of the kernel's task (Docker runtimes and OpenPAI): needs python and ipykernel.")
    python = Unicode("", config=True, help="Python that runs ipykernel in the task; empty = this Jupyter server's "
                     "own python on the embedded cluster's process runtime, else python3.")
    cpu = Int(1, config=True)
    memory_mb = Int(4096, config=True)
    gpu = Int(0, config=True)
    virtual_cluster = Unicode("default", config=True)
    start_timeout = Float(300.0, config=True, help="Seconds to wait for the job to run and its kernel to answer.")
    poll_interval = Float(1.0, config=True, help="How long a job state read by poll() is reused, in seconds.")
    tunnel = Enum(MODES, default_value="auto", config=True,
                  help="How the Jupyter server reaches the kernel's ports: `auto` (directly; through an SSH tunnel to "
                       "the task's sshd where a remote task's ports do not answer), `always` (the tunnel; the kernel "
                       "binds its task's loopback only), `never` (directly).")
    ssh_plugin = Bool(None, allow_none=True, config=True,
                      help="Give the job the ssh runtime plugin (the tunnel needs it). Unset: with `tunnel: always`, "
                           "and with `auto` on a remote OpenPAI.")
    identity = Unicode("", config=True, help="Private key the tunnel logs in with. Empty: the job's key on the "
                       "embedded cluster; ~/.ssh/id_ed25519 (id_ecdsa, id_rsa) on OpenPAI, whose public half is put "
                       "in the job's userssh.")
    direct_timeout = Float(15.0, config=True, help="With `tunnel: auto`: seconds the direct path is tried, once the "
                           "job runs, before the SSH tunnel is.")

    job_id: str | None = None
    incarnation = 0
    _client: Any = None
    _shutdown: str | None = None      # "restart" or "shutdown" while a requested shutdown is under way
    _reuse = False                    # the job lives on after the restart shutdown: start its next kernel
    _checked: tuple[float, int | None] = (0.0, None)
    _reported = False
    _is_local: bool | None = None
    _tunnel: KernelTunnel | None = None
    _task_info: dict[str, Any] | None = None  # the kernel's ports in its task (connection_info has the local ones)
    path = ""                                 # "direct" or "SSH tunnel via HOST:PORT"

    # ---- state ----------------------------------------------------------------------------------------------
    @property
    def has_process(self) -> bool:
        return self.job_id is not None

    @property
    def client(self) -> Any:
        if self._client is None:
            from ..client import AsyncClient

            self._client = AsyncClient(self.profile or None)
        return self._client

    async def _detail(self) -> Any:
        return await self.client.detail(self.job_id)

    async def _log_tail(self) -> str:
        try:
            return await self.client.logs(self.job_id, role=jobspec.ROLE, stream="all", tail=True)
        except PaiError:
            return ""

    def _log(self) -> logging.Logger | Any:
        return getattr(self, "log", logging.getLogger("pai_jupyter.kernel"))

    # ---- start ----------------------------------------------------------------------------------------------
    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        km = self.parent
        if km is not None and getattr(km, "_transport_encryption_policy", None) is not None \
                and km._transport_encryption_policy() == "required":
            raise KernelStartError("transport_encryption='required' is not supported by the PAI kernel provisioner")
        kwargs = await super().pre_launch(**kwargs)
        kwargs["cmd"] = list(self.kernel_spec.argv)
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        key = self.parent.session.key if self.parent is not None else os.urandom(16).hex().encode()
        if self._reuse and self.job_id:
            self._reuse = False
            self.incarnation += 1
            detail = await self._detail()
            if detail.state == "RUNNING" and jobspec.connection_info(detail, key) is not None:
                return await self._connect(detail, key, time.monotonic() + self.start_timeout)
        old = (self._task_info or self.connection_info) if self.job_id else {}
        wanted = {label: int(old[f"{label}_port"]) for label in jobspec.LABELS if old.get(f"{label}_port")}
        self.job_id, self.incarnation, self._reported, self._checked = None, 0, False, (0.0, None)
        return await self._submit_and_connect(cmd, key, kwargs, wanted)

    async def _submit_and_connect(self, cmd: list[str], key: bytes, kwargs: dict[str, Any],
                                  wanted: dict[str, int]) -> KernelConnectionInfo:
        from ..client.errors import InvalidJob
        from ..client.locality import locality

        try:
            info = await self.client.info()
        except PaiError as exc:
            raise KernelStartError(f"the PAI kernel cannot start: {exc}") from None
        self._is_local = locality(self.client.profile, info).this_machine
        owner = bool(self._is_local and info.get("admin"))
        env = kwargs.get("env") or {}
        cwd = kwargs.get("cwd")
        name = jobspec.job_name(env.get("JPY_SESSION_NAME"), cwd)
        job = jobspec.kernel_job(name, key.decode("ascii"), self._options(cmd, info), kernel_name=self._kernel_name(),
                                 workdir=os.path.abspath(cwd) if (cwd and owner) else None,
                                 bind_ip="127.0.0.1" if (self._is_local or self.tunnel == "always") else "0.0.0.0",
                                 ports=wanted if self._is_local else None,
                                 ssh=jobspec.ssh_parameters(self._public_key()) if self._uses_ssh() else None)
        try:
            self.job_id = await self.client.submit(job)
        except InvalidJob as exc:
            raise KernelStartError(f"the PAI kernel's job was refused by {self.client.where}: {exc}") from None
        except PaiError as exc:
            raise KernelStartError(f"the PAI kernel's job could not be submitted: {exc}") from None
        self._log().info("PAI kernel %s: job %s submitted to %s", self.kernel_id, self.job_id, self.client.where)
        deadline = time.monotonic() + self.start_timeout
        try:
            detail = await self._until_running(deadline)
            return await self._connect(detail, key, deadline)
        except BaseException:
            await self._close_tunnel()
            await self._stop_job()
            raise

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

    async def _connect(self, detail: Any, key: bytes, deadline: float) -> KernelConnectionInfo:
        """Reach the running kernel directly or through the tunnel (kernelspec ``tunnel``); say which in the log."""
        task_info = jobspec.connection_info(detail, key)
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
            hint = " (the kernelspec turned it off: reinstall it with --ssh-plugin)" \
                if self.ssh_plugin is False and "no ssh plugin" in str(exc) else ""
            raise KernelStartError(f"the PAI kernel's job {self.job_id} runs, but {exc}{hint}; it was stopped") \
                from None
        await self._until_answering(info, deadline)
        if self.tunnel == "auto" and await self._answers(task_info, 1000):  # the kernel was only slow to start
            await self._close_tunnel()
            return self._use(task_info, "direct")
        assert self._tunnel is not None
        return self._use(info, f"SSH tunnel via {self._tunnel.via}")

    def _use(self, info: dict[str, Any], path: str) -> KernelConnectionInfo:
        self.connection_info, self.path = info, path
        ports = ", ".join(f"{label} {info[f'{label}_port']}" for label in jobspec.LABELS)
        self._log().info("PAI kernel %s: job %s, kernel reached %s (%s:%s)", self.kernel_id, self.job_id,
                         "directly" if path == "direct" else f"through an {path}", info["ip"], ports)
        return info

    async def _open_tunnel(self, task_info: dict[str, Any], deadline: float) -> dict[str, Any]:
        """The tunnel's connection info: the live tunnel when it still leads to these ports, else a new one that
        asks for the old local ports (connected clients find the restarted kernel)."""
        ports = task_ports(task_info)
        if self._tunnel is not None and self._tunnel.matches(ports):
            return self._tunnel.connection_info(task_info)
        wanted = self._tunnel.local_ports if self._tunnel is not None else {}
        await self._close_tunnel()
        self._tunnel = await open_tunnel(self.client, str(self.job_id), ports, identity=self._ssh_identity(),
                                         deadline=deadline, local_ports=wanted, log=self._log())
        return self._tunnel.connection_info(task_info)

    async def _close_tunnel(self) -> None:
        if self._tunnel is not None:
            tunnel, self._tunnel = self._tunnel, None
            await tunnel.close()
            self._log().info("PAI kernel %s: SSH tunnel via %s closed", self.kernel_id, tunnel.via)

    def _kernel_name(self) -> str:
        return str(getattr(self.parent, "kernel_name", "") or "")

    def _options(self, cmd: list[str], info: Any) -> KernelJobOptions:
        runtime = str(info.get("runtime", "")) if isinstance(info, dict) else ""
        python = self.python or (cmd[0] if cmd and cmd[0] not in ("python", "python3", "{python}") else "")
        if not python:
            python = sys.executable if (self._is_local and runtime.startswith("process")) else "python3"
        return KernelJobOptions(python=python, image=self.image, cpu=self.cpu, memory_mb=self.memory_mb,
                                gpu=self.gpu, virtual_cluster=self.virtual_cluster)

    async def _until_running(self, deadline: float) -> Any:
        """The job's detail once its task runs with its host and ports; a clear error when it ends or waits."""
        delay, shown = 0.05, ""
        while True:
            detail = await self._detail()
            if detail.state in FINAL:
                raise KernelStartError(await self._why_ended(detail, "could not start"))
            if detail.state == "RUNNING" and jobspec.connection_info(detail, b"") is not None:
                return detail
            state = detail.state + (f" ({detail.job_status.waiting_reason})" if detail.job_status.waiting_reason
                                    else "")
            if state != shown:
                self._log().info("PAI kernel %s: job %s is %s", self.kernel_id, self.job_id, state)
                shown = state
            if time.monotonic() > deadline:
                raise KernelStartError(f"the PAI kernel's job {self.job_id} was still {state} after "
                                       f"{self.start_timeout:g} s; it was stopped")
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    @staticmethod
    async def _answers(info: dict[str, Any], wait_ms: int) -> bool:
        """Whether the kernel's heartbeat at ``info`` echoes a ping within ``wait_ms``."""
        import zmq
        import zmq.asyncio

        sock = zmq.asyncio.Context.instance().socket(zmq.REQ)
        sock.linger = 0
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
                note = None if self._is_local or self._tunnel is not None else (
                    SSH_NOTE["never"] if self.tunnel == "never" else SSH_NOTE["no-plugin"]
                    if not self._uses_ssh() else None)
                where = f"; {note}" if note else ""
                via = f" (through the SSH tunnel via {self._tunnel.via})" if self._tunnel is not None else ""
                raise _NoAnswer(
                    f"the PAI kernel's job {self.job_id} runs but its kernel did not answer at {info['ip']}:"
                    f"{info['hb_port']}{via} within {self.start_timeout:g} s{where}; it was stopped. "
                    f"Last lines of its log:\n{_last_lines(await self._log_tail())}")

    async def _why_ended(self, detail: Any, what: str) -> str:
        """One message with everything known about an ended job: state, exit code, diagnostics, log tail."""
        s = detail.job_status
        task = next(iter(detail.role_tasks(jobspec.ROLE)), None)
        code = s.app_exit_code if s.app_exit_code is not None else (task.container_exit_code if task else None)
        diag = (task.container_exit_diagnostics if task else None) or s.app_exit_diagnostics or ""
        tail = _last_lines(await self._log_tail())
        hint = ""
        if "No module named" in tail or "has no ipykernel" in tail or "not found" in tail or code in (126, 127):
            hint = (" The task's python could not run ipykernel: the image must have python and ipykernel "
                    f"(this kernelspec runs {self.python or 'its python'!s} in image {self.image}); "
                    "reinstall the kernelspec with `pai kernel install --image IMAGE --python PYTHON`.")
        return (f"the PAI kernel's job {self.job_id} {what}: {s.state}, exit code {code}"
                + (f": {diag}" if diag else "") + "." + hint + (f"\nLast lines of its log:\n{tail}" if tail else ""))

    # ---- running --------------------------------------------------------------------------------------------
    async def poll(self) -> int | None:
        if self.job_id is None:
            return 0
        if self._shutdown is not None:
            return await self._poll_shutdown()
        now = time.monotonic()
        if now - self._checked[0] < self.poll_interval:
            return self._checked[1]
        try:
            detail = await self._detail()
        except PaiError as exc:
            self._log().warning("PAI kernel %s: cannot read job %s: %s", self.kernel_id, self.job_id, exc)
            return None  # a cluster that does not answer is not a dead kernel
        code = None
        if detail.state in FINAL:
            code = _exit_code(detail)
            if not self._reported:  # a job we stopped did not die: nothing to report
                self._reported = True
                self._log().error("PAI kernel %s died: %s", self.kernel_id,
                                  await self._why_ended(detail, "ended"))
        elif self._tunnel is not None and not self._tunnel.alive and self._task_info is not None:
            await self._reopen_tunnel()
        self._checked = (time.monotonic(), code)
        return code

    async def _reopen_tunnel(self) -> None:
        """The SSH connection dropped while the job runs: open it again on the same local ports."""
        assert self._tunnel is not None and self._task_info is not None
        self._log().warning("PAI kernel %s: SSH tunnel via %s dropped; re-opening it", self.kernel_id,
                            self._tunnel.via)
        try:
            await self._open_tunnel(self._task_info, time.monotonic() + 30)
        except TunnelError as exc:
            self._log().warning("PAI kernel %s: the SSH tunnel could not be re-opened: %s", self.kernel_id, exc)

    async def _poll_shutdown(self) -> int | None:
        """During a requested shutdown: 0 once the launcher says this kernel ended (or the job did)."""
        try:
            detail = await self._detail()
        except PaiError as exc:
            self._log().warning("PAI kernel %s: cannot read job %s: %s", self.kernel_id, self.job_id, exc)
            return None
        if detail.state in FINAL:
            self._reuse = False
            return _exit_code(detail)
        tail = await self._log_tail()
        if f"{TAG} kernel {self.incarnation} ended for a restart" in tail:
            self._reuse = self._shutdown == "restart"
            return 0
        if f"{TAG} kernel {self.incarnation} ended with" in tail:
            self._reuse = False
            return 0
        return None

    async def wait(self) -> int | None:
        while True:
            code = await self.poll()
            if code is not None:
                return code
            await asyncio.sleep(0.1)

    async def shutdown_requested(self, restart: bool = False) -> None:
        self._shutdown = "restart" if restart else "shutdown"

    def get_shutdown_wait_time(self, recommended: float = 5.0) -> float:
        return max(recommended, 10.0)

    async def send_signal(self, signum: int) -> None:
        """Only ending signals can reach a PAI kernel (they stop its job); interrupts are messages."""
        import signal

        if signum in (signal.SIGTERM, signal.SIGKILL):
            await self._stop_job()
        elif signum != 0:
            self._log().warning("PAI kernel %s: signal %d cannot be sent to a kernel in a PAI job; interrupts go "
                                "through the control channel (interrupt_mode: message)", self.kernel_id, signum)

    async def terminate(self, restart: bool = False) -> None:
        if self._shutdown == "restart":
            return  # the kernel is ending for a restart; kill() stops the job if it never does
        await self._stop_job()

    async def kill(self, restart: bool = False) -> None:
        self._reuse = False
        await self._stop_job()

    async def cleanup(self, restart: bool = False) -> None:
        self._shutdown = None
        self._checked = (0.0, None)
        if restart:
            return
        await self._stop_job()
        await self._close_tunnel()
        self.job_id = None  # has_process is False from now on; a start again submits a new job
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _stop_job(self, timeout: float = 60.0) -> None:
        """Stop the job (nothing to do when it already ended) and wait until it is final."""
        if self.job_id is None:
            return
        self._reported = True
        try:
            detail = await self._detail()
            if detail.state not in FINAL:
                await self.client.stop(self.job_id)
                self._log().info("PAI kernel %s: stopping job %s", self.kernel_id, self.job_id)
            deadline = time.monotonic() + timeout
            while detail.state not in FINAL and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                detail = await self._detail()
        except PaiError as exc:
            self._log().warning("PAI kernel %s: stopping job %s failed: %s", self.kernel_id, self.job_id, exc)

    # ---- persistence ----------------------------------------------------------------------------------------
    async def get_provisioner_info(self) -> dict[str, Any]:
        info = await super().get_provisioner_info()
        info.update(job_id=self.job_id, incarnation=self.incarnation, profile=self.profile, path=self.path)
        return info

    async def load_provisioner_info(self, provisioner_info: dict[str, Any]) -> None:
        await super().load_provisioner_info(provisioner_info)
        self.job_id = provisioner_info.get("job_id")
        self.incarnation = int(provisioner_info.get("incarnation") or 0)


def _exit_code(detail: Any) -> int:
    s = detail.job_status
    if s.app_exit_code is not None:
        return int(s.app_exit_code)
    task = next(iter(detail.tasks), None)
    if task is not None and task.container_exit_code is not None:
        return int(task.container_exit_code)
    return 0 if s.state == "SUCCEEDED" else 1


def _last_lines(text: str, n: int = 20) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-n:])
