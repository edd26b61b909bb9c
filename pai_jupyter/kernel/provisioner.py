"""``PaiProvisioner``: jupyter_client's kernel provisioner that runs the kernel as a one-task PAI job.

Start submits the job (see jobspec.py), waits for its task to run and its heartbeat to answer, and hands the
KernelManager the task's host and ports with the manager's own keys. Interrupts are control-channel messages
(the kernelspec's ``interrupt_mode: message``), so no signal has to reach the task. A restart keeps the job when
it is alive (the launcher in the task starts a fresh kernel on the same ports), else submits a new one. Shutdown
and Jupyter's idle culling stop the job; a job that ends on its own is reported with its exit code, diagnostics
and the last lines of its log. Progress of a requested shutdown is read from the launcher's log lines. How the
kernel is reached (directly or through an SSH tunnel) and why a job ended are reach.py's; the lease that ends the
job when this Jupyter server dies is lease.py's.

The kernel's channels are private to its owner by CurveZMQ, always: each of the five sockets is a CurveZMQ
server whose key pair this provisioner makes (the KernelManager's, kept across restarts, as its HMAC key is) and
hands the job as a secret, and every client of the KernelManager connects with it (jupyter_client >= 8.9). A
local account that connects to a kernel port, or subscribes to its iopub, completes no handshake and gets
nothing; before, it read every cell's code and output on iopub (the HMAC key only kept it from sending). ipc://
sockets in an owner-only directory were the other way, and no such directory exists here: the kernel runs as the
task's account (``pai-<name>`` on a root daemon, or root in a Docker container that sees only its own mounts)
and the Jupyter server as the person's own, so a directory both reach is one a third party (a group, or the
daemon's making) reaches too, and a remote OpenPAI task shares no file system with the Jupyter server at all.
CurveZMQ needs nothing shared but the keys, which travel the way the HMAC key does (a masked job secret, an
environment variable the launcher removes, a 0600 connection file in a private temp dir that the kernel removes
once read), and it covers the direct path, the SSH tunnel and remote tasks alike.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from jupyter_client.connect import KernelConnectionInfo
from traitlets import Float, Int, Unicode

from ..client.errors import PaiError
from ..common.states import FINAL
from . import jobspec
from .jobspec import KernelJobOptions
from .lease import LeaseKeeper, lease_terms
from .reach import KernelReach, KernelStartError

if TYPE_CHECKING:
    from ..client import JobDetail

__all__ = ["KernelStartError", "PaiProvisioner"]

TAG = "[pai_jupyter kernel]"


class PaiProvisioner(KernelReach):
    """Runs the kernel as a PAI job (kernelspec ``metadata.kernel_provisioner.provisioner_name: pai-provisioner``).
    Its settings: the job's resources here; profile, image, python, start_timeout and the tunnel's in KernelReach."""

    cpu = Int(1, config=True)
    memory_mb = Int(4096, config=True)
    gpu = Int(0, config=True)
    virtual_cluster = Unicode("default", config=True)
    poll_interval = Float(1.0, config=True, help="How long a job state read by poll() is reused, in seconds.")
    lease_seconds = Float(
        120.0,
        config=True,
        help="On the embedded cluster: the kernel's job is stopped this many seconds after this Jupyter server "
        "last renewed its lease (it renews three times per lease while it runs).",
    )

    incarnation = 0
    _shutdown: str | None = None  # "restart" or "shutdown" while a requested shutdown is under way
    _reuse = False  # the job lives on after the restart shutdown: start its next kernel
    _checked: tuple[float, int | None] = (0.0, None)
    _reported = False
    _lease: LeaseKeeper | None = None

    # ---- state ----------------------------------------------------------------------------------------------
    @property
    def has_process(self) -> bool:
        return self.job_id is not None

    # ---- start ----------------------------------------------------------------------------------------------
    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        import zmq
        from jupyter_client.connect import ConnectionFileMixin

        if not zmq.has("curve") or "curve_publickey" not in ConnectionFileMixin.class_trait_names():
            raise KernelStartError(
                "the PAI kernel's channels are encrypted with CurveZMQ, which this Jupyter server cannot do: "
                "it needs jupyter_client >= 8.9 and pyzmq with CurveZMQ (pip install -U jupyter_client pyzmq)"
            )
        kwargs = await super().pre_launch(**kwargs)
        kwargs["cmd"] = list(self.kernel_spec.argv)
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        km = self.parent
        key = km.session.key if km is not None else os.urandom(16).hex().encode()
        self._curve = curve = self._curve_keys()
        if self._reuse and self.job_id:
            self._reuse = False
            self.incarnation += 1
            detail = await self._detail()
            if detail.state == "RUNNING" and jobspec.connection_info(detail, key) is not None:
                return await self._connect(detail, key, time.monotonic() + self.start_timeout)
        old: dict[str, Any] = dict(self._task_info or self.connection_info) if self.job_id else {}
        wanted = {label: int(old[f"{label}_port"]) for label in jobspec.LABELS if old.get(f"{label}_port")}
        self._end_lease()
        self.job_id, self.incarnation, self._reported, self._checked = None, 0, False, (0.0, None)
        self._host_key = None  # a new job's sshd: a new first use
        return await self._submit_and_connect(cmd, key, curve[1], kwargs, wanted)

    def _curve_keys(self) -> tuple[bytes, bytes]:
        """The KernelManager's CurveZMQ key pair (public, secret; Z85), made on the first start."""
        import zmq

        km = self.parent
        if km is not None and km.curve_publickey and km.curve_secretkey:
            return bytes(km.curve_publickey), bytes(km.curve_secretkey)
        if self._curve is not None:
            return self._curve
        public, secret = zmq.curve_keypair()
        return public, secret

    async def _submit_and_connect(
        self, cmd: list[str], key: bytes, curve_secret: bytes, kwargs: dict[str, Any], wanted: dict[str, int]
    ) -> KernelConnectionInfo:
        from ..client.errors import InvalidJob
        from ..client.locality import locality

        try:
            info = await self.client.info()
        except PaiError as exc:
            raise KernelStartError(f"the PAI kernel cannot start: {exc}") from None
        where = locality(self.client.profile, info)
        self._is_local = where.this_machine
        owner = bool(self._is_local and info.admin)
        env = kwargs.get("env") or {}
        cwd = kwargs.get("cwd")
        name = jobspec.job_name(env.get("JPY_SESSION_NAME"), cwd)
        job = jobspec.kernel_job(
            name,
            key.decode("ascii"),
            self._options(cmd, info),
            curve_secret=curve_secret,
            kernel_name=self._kernel_name(),
            workdir=os.path.abspath(cwd) if (cwd and owner) else None,
            bind_ip="127.0.0.1" if (self._is_local or self.tunnel == "always") else "0.0.0.0",
            ports=wanted if self._is_local else None,
            ssh=jobspec.ssh_parameters(self._public_key()) if self._uses_ssh() else None,
            lease=lease_terms(self.lease_seconds) if where.embedded else None,
        )
        try:
            self.job_id = await self.client.submit(job)
        except InvalidJob as exc:
            raise KernelStartError(f"the PAI kernel's job was refused by {self.client.where}: {exc}") from None
        except PaiError as exc:
            raise KernelStartError(f"the PAI kernel's job could not be submitted: {exc}") from None
        self._log().info("PAI kernel %s: job %s submitted to %s", self.kernel_id, self.job_id, self.client.where)
        if where.embedded:
            self._hold_lease()
        deadline = time.monotonic() + self.start_timeout
        try:
            detail = await self._until_running(deadline)
            return await self._connect(detail, key, deadline)
        except BaseException:
            await self._close_tunnel()
            await self._stop_job()
            raise

    def _kernel_name(self) -> str:
        return str(getattr(self.parent, "kernel_name", "") or "")

    def _options(self, cmd: list[str], info: Any) -> KernelJobOptions:
        runtime = str(getattr(info, "runtime", None) or "")  # (ServerInfo: the embedded cluster says its runtime)
        python = self.python or (cmd[0] if cmd and cmd[0] not in ("python", "python3", "{python}") else "")
        if not python:
            python = sys.executable if (self._is_local and runtime.startswith("process")) else "python3"
        return KernelJobOptions(
            python=python,
            image=self.image,
            cpu=self.cpu,
            memory_mb=self.memory_mb,
            gpu=self.gpu,
            virtual_cluster=self.virtual_cluster,
        )

    async def _until_running(self, deadline: float) -> JobDetail:
        """The job's detail once its task runs with its host and ports; a clear error when it ends or waits."""
        delay, shown = 0.05, ""
        while True:
            detail = await self._detail()
            if detail.state in FINAL:
                raise KernelStartError(await self._why_ended(detail, "could not start"))
            if detail.state == "RUNNING" and jobspec.connection_info(detail, b"") is not None:
                return detail
            state = detail.state + (
                f" ({detail.job_status.waiting_reason})" if detail.job_status.waiting_reason else ""
            )
            if state != shown:
                self._log().info("PAI kernel %s: job %s is %s", self.kernel_id, self.job_id, state)
                shown = state
            if time.monotonic() > deadline:
                raise KernelStartError(
                    f"the PAI kernel's job {self.job_id} was still {state} after "
                    f"{self.start_timeout:g} s; it was stopped"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 0.5)

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
                self._log().error("PAI kernel %s died: %s", self.kernel_id, await self._why_ended(detail, "ended"))
        elif self._tunnel is not None and not self._tunnel.alive and self._task_info is not None:
            await self._reopen_tunnel()
        self._checked = (time.monotonic(), code)
        return code

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
            self._log().warning(
                "PAI kernel %s: signal %d cannot be sent to a kernel in a PAI job; interrupts go "
                "through the control channel (interrupt_mode: message)",
                self.kernel_id,
                signum,
            )

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
        self._end_lease()
        self.job_id = None  # has_process is False from now on; a start again submits a new job
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _stop_job(self, timeout: float = 60.0) -> None:
        """Stop the job (nothing to do when it already ended) and wait until it is final."""
        if self.job_id is None:
            return
        self._reported = True
        self._end_lease()
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

    # ---- the lease -----------------------------------------------------------------------------------------
    def _hold_lease(self) -> None:
        """Renew the job's lease from now on (a thread: see lease.py)."""
        self._end_lease()
        assert self.job_id is not None
        self._lease = LeaseKeeper(self.profile or None, self.job_id, self.lease_seconds, self._log()).start()

    def _end_lease(self) -> None:
        if self._lease is not None:
            self._lease.stop()
            self._lease = None

    # ---- persistence ----------------------------------------------------------------------------------------
    async def get_provisioner_info(self) -> dict[str, Any]:
        info = await super().get_provisioner_info()
        info.update(
            job_id=self.job_id,
            incarnation=self.incarnation,
            profile=self.profile,
            path=self.path,
            leased=self._lease is not None,
            host_key=self._host_key,
        )
        return info

    async def load_provisioner_info(self, provisioner_info: dict[str, Any]) -> None:
        await super().load_provisioner_info(provisioner_info)
        self.job_id = provisioner_info.get("job_id")
        self.incarnation = int(provisioner_info.get("incarnation") or 0)
        self._host_key = provisioner_info.get("host_key")
        if self.job_id and provisioner_info.get("leased"):  # a Jupyter server that took the kernel over renews it
            self._hold_lease()


def _exit_code(detail: JobDetail) -> int:
    s = detail.job_status
    if s.app_exit_code is not None:
        return int(s.app_exit_code)
    task = next(iter(detail.tasks), None)
    if task is not None and task.container_exit_code is not None:
        return int(task.container_exit_code)
    return 0 if s.state == "SUCCEEDED" else 1
