"""An SSH tunnel to a PAI kernel: five loopback ports on the Jupyter server forwarded to the kernel's ports in its task.

Used when the Jupyter server cannot reach a remote task's ports (kernelspec ``tunnel: auto``) or always
(``tunnel: always``). The kernel's job carries the ``ssh`` runtime plugin; the tunnel logs into the task's sshd
(where ``pai ssh-info`` says: the job's key on the embedded cluster, the user's own key on OpenPAI) with asyncssh
and forwards each local port to ``127.0.0.1:<port>`` inside the task (local port forwarding), so the kernel may
bind the task's loopback only. Jupyter is handed the local ports; the tunnel lives as long as the kernel's job.

The task's sshd makes its host key when it starts, and neither cluster reports it, so the tunnel trusts it on
first use, per job: the key the first connection to a job's sshd saw is the only one a later connection (a tunnel
re-opened after a drop, a Jupyter server that took the kernel over) accepts for that job; another key is refused
(the message names the trusted key's fingerprint) before any login, so that sshd gets no login and forwards
nothing. A new job (a restart after the kernel died) is a new first use. Past the tunnel, the kernel's channels
are CurveZMQ (provisioner.py): an impostor that won the first use still reads and sends nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..client.errors import BadRequest, JobNotFound, NotSupported, PaiError
from ..common.states import FINAL
from .jobspec import LABELS, ROLE

if TYPE_CHECKING:
    from ..client import AsyncClient
    from ..client.ssh import SshTarget

MODES = ("auto", "always", "never")
TASK_HOST = "127.0.0.1"  # the kernel's ports as seen from inside its task


class TunnelError(RuntimeError):
    """The tunnel could not be opened: no ssh plugin, no key, the sshd does not answer or refuses the key."""


class KernelTunnel:
    """One SSH connection to the task's sshd with a local forward per kernel port."""

    def __init__(
        self, conn: Any, listeners: dict[str, Any], via: str, task_ports: dict[str, int], host_key: str
    ) -> None:
        self.conn, self.listeners, self.via, self.task_ports = conn, listeners, via, task_ports
        self.host_key = host_key  # the sshd's public host key (OpenSSH format)
        self.local_ports = {label: int(lst.get_port()) for label, lst in listeners.items()}
        self._closed = False

    @property
    def alive(self) -> bool:
        """False once closed or once the SSH connection dropped (the job ended, its sshd went away)."""
        return not self._closed and not self.conn.is_closed()

    def connection_info(self, task_info: dict[str, Any]) -> dict[str, Any]:
        """The task's connection info with the local end of each port."""
        info = dict(task_info, ip="127.0.0.1")
        for label, port in self.local_ports.items():
            info[f"{label}_port"] = port
        return info

    def matches(self, task_ports: dict[str, int]) -> bool:
        return self.alive and task_ports == self.task_ports

    async def close(self) -> None:
        """Stop listening on the local ports and close the SSH connection."""
        if self._closed:
            return
        self._closed = True
        for lst in self.listeners.values():
            lst.close()
        for lst in self.listeners.values():
            try:
                await lst.wait_closed()
            except Exception:
                pass
        self.conn.close()
        try:
            await asyncio.wait_for(self.conn.wait_closed(), 10)
        except Exception:
            pass


def _fingerprint(key: str | None) -> str:
    import asyncssh

    return asyncssh.import_public_key(key).get_fingerprint() if key else "none"


def task_ports(info: dict[str, Any]) -> dict[str, int]:
    return {label: int(info[f"{label}_port"]) for label in LABELS}


async def open_tunnel(
    client: AsyncClient,
    job_id: str,
    ports: dict[str, int],
    *,
    identity: str | None,
    deadline: float,
    local_ports: dict[str, int] | None = None,
    host_key: str | None = None,
    connect_timeout: float = 10.0,
    log: logging.Logger | Any = None,
) -> KernelTunnel:
    """Log into the kernel task's sshd and forward a loopback port per kernel port (``local_ports`` wanted again
    after a restart, where free). ``host_key``: the only host key accepted (the job's, from the first use); None:
    this is the first use, and the tunnel's ``host_key`` says what was seen. Retries while the sshd is still
    starting, until ``deadline``."""
    try:
        import asyncssh
    except ImportError:
        raise TunnelError(
            "an SSH tunnel needs the asyncssh package on the Jupyter server (pip install asyncssh)"
        ) from None
    log = log or logging.getLogger("pai_jupyter.kernel")
    delay = 0.2
    while True:
        target = await _target(client, job_id, identity)
        if target is not None:
            login = _Login(asyncssh, job_id, host_key, connect_timeout)
            tunnel = await login.open(target, ports, local_ports or {}, log)
            if isinstance(tunnel, KernelTunnel):
                return tunnel
            last = tunnel
        else:
            last = "the kernel task's sshd has no address yet"
        await _still_worth_waiting(client, job_id, deadline, last)
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, 1.0)


class _Login:
    """One try at logging into the kernel task's sshd: the tunnel, or why it does not answer yet (a refusal
    that another try cannot mend raises TunnelError)."""

    def __init__(self, asyncssh: Any, job_id: str, host_key: str | None, connect_timeout: float) -> None:
        self.asyncssh, self.job_id, self.host_key, self.connect_timeout = asyncssh, job_id, host_key, connect_timeout

    async def open(
        self, target: SshTarget, ports: dict[str, int], local_ports: dict[str, int], log: logging.Logger | Any
    ) -> KernelTunnel | str:
        asyncssh, host_key, job_id = self.asyncssh, self.host_key, self.job_id
        where = f"{target.host}:{target.port}"
        assert target.key is not None  # _target refuses a target without one
        key = str(Path(target.key).expanduser())
        try:
            conn = await asyncssh.connect(
                target.host,
                target.port,
                username=target.user,
                known_hosts=([asyncssh.import_public_key(host_key)], [], []) if host_key else None,
                client_keys=[key],
                agent_path=None,
                password=None,
                kbdint_auth=False,
                preferred_auth="publickey",
                connect_timeout=self.connect_timeout,
                keepalive_interval=30,
                keepalive_count_max=4,
            )
        except asyncssh.HostKeyNotVerifiable:
            raise TunnelError(
                f"the kernel task's sshd at {where} presented a host key other than the one job {job_id}'s "
                f"sshd presented first ({_fingerprint(host_key)}): refused, as a stranger may listen there "
                "(trust on first use, per job)"
            ) from None
        except asyncssh.PermissionDenied:
            raise TunnelError(
                f"the kernel task's sshd at {where} refused the key {key} for user {target.user}: "
                "its public key must be in your OpenPAI SSH keys, or beside it as KEY.pub (the "
                "kernel's job then lists it in userssh); on the embedded cluster, leave the "
                "kernelspec's `identity` unset to use the job's own key"
            ) from None
        except (OSError, asyncio.TimeoutError, asyncssh.Error) as exc:
            return f"the kernel task's sshd at {where} does not answer ({exc or type(exc).__name__})"
        try:
            await _interactive(conn)
            listeners = await _forward(conn, ports, local_ports)
        except BaseException:
            conn.close()
            raise
        seen = conn.get_server_host_key()
        assert seen is not None  # None only after a GSS key exchange, which is not offered
        log.debug("pai kernel tunnel to %s open (host key %s)", where, seen.get_fingerprint())
        return KernelTunnel(conn, listeners, where, dict(ports), seen.export_public_key().decode().strip())


async def _still_worth_waiting(client: AsyncClient, job_id: str, deadline: float, last: str) -> None:
    """TunnelError (saying ``last``, why the sshd did not let the tunnel in) once the job ended or the deadline
    passed."""
    try:
        state = (await client.detail(job_id)).state
    except PaiError:
        state = ""  # the cluster may answer again before the deadline
    if state in FINAL:
        raise TunnelError(f"the job ended ({state}) before its sshd let the tunnel in: {last}")
    if time.monotonic() > deadline:
        raise TunnelError(
            f"{last}: is the ssh plugin's sshd running in the task (its log says), and is its port "
            "reachable from the Jupyter server?"
        )


async def _target(client: AsyncClient, job_id: str, identity: str | None) -> SshTarget | None:
    """The kernel task's SshTarget once it has an address; None while it has none; TunnelError when it never will."""
    from ..client.ssh import ssh_info

    try:
        [target] = await ssh_info(client, job_id, role=ROLE, index=0, identity=identity or None)
    except (NotSupported, JobNotFound) as exc:
        raise TunnelError(f"no SSH tunnel to the kernel: {exc}") from None
    except BadRequest as exc:
        if "with ssh" in str(exc):  # the task's sshd is not listed yet
            return None
        raise TunnelError(f"no SSH tunnel to the kernel: {exc}") from None
    except PaiError as exc:
        if "ssh plugin" in str(exc):
            raise TunnelError(f"no SSH tunnel to the kernel: {exc}") from None
        raise TunnelError(
            f"no SSH tunnel to the kernel: the cluster did not say where the task's sshd is: {exc}"
        ) from None
    if target.problem:
        raise TunnelError(f"no SSH tunnel to the kernel: {target.problem}")
    if not target.host or not target.port:
        return None
    if not target.key:
        raise TunnelError(
            "no SSH tunnel to the kernel: no private key on the Jupyter server (set the kernelspec's "
            "`identity`, or create ~/.ssh/id_ed25519 and add its public key to your OpenPAI profile)"
        )
    if not Path(target.key).expanduser().exists():
        raise TunnelError(f"no SSH tunnel to the kernel: the private key {target.key} does not exist")
    return target


async def _interactive(conn: Any) -> None:
    """Open a session with a pty that waits for the tunnel's end: OpenSSH's sshd turns Nagle's algorithm off on a
    connection only once it has a pty session; without one every small kernel message back waits for a delayed
    ACK (~40 ms a cell). Best effort: a sshd that refuses it still forwards."""
    try:
        await conn.create_process("cat", term_type="dumb", encoding=None)
    except Exception:
        pass


async def _forward(conn: Any, ports: dict[str, int], wanted: dict[str, int]) -> dict[str, Any]:
    """A loopback listener per kernel port: the wanted local port where it is free, else any."""
    out: dict[str, Any] = {}
    for label in LABELS:
        listener = None
        if wanted.get(label):
            try:
                listener = await conn.forward_local_port("127.0.0.1", wanted[label], TASK_HOST, ports[label])
            except OSError:
                listener = None
        if listener is None:
            listener = await conn.forward_local_port("127.0.0.1", 0, TASK_HOST, ports[label])
        out[label] = listener
    return out
