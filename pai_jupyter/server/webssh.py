"""Web SSH: the task terminal route of a remote OpenPAI profile, as an SSH session bridged to the browser.

``{base_url}pai/jobs/{user}~{name}/{role}/{index}/terminal/websocket`` speaks terminado's protocol for every
profile. On the embedded cluster the daemon serves it (``terminal.TerminalProxyHandler``); a real OpenPAI has no
terminal route, so here this server opens an SSH session (asyncssh) to the task's sshd — the ``ssh`` runtime
plugin's, at the task's ``containerIp`` and ``containerPorts.ssh`` — with a pty, and relays it. Same auth as
every route: Jupyter's login, and only the profile user's jobs. The key is ``c.PaiWebSsh.identity`` (default
``~/.ssh/id_ed25519``, ``id_ecdsa`` or ``id_rsa``); its public half must be in the user's OpenPAI profile or the
job's ``userssh``. The task's host key is checked (``client.ssh.trusted_host_keys``): the key its cluster
reported, else the one kept for the job on first use; a changed key is refused. Errors come before the
websocket upgrade, as JSON: 409 when the job has no ssh plugin or the task is not running, 502 when the port does
not answer, the host key changed or the key is refused.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import ws_authenticated
from tornado import websocket
from traitlets import Float, Unicode
from traitlets.config import Configurable

from ..client import JobNotFound, NotSupported, PaiError
from .common import PaiHTTPError, not_found
from .proxy import _is_websocket
from .terminal import TerminalProxyHandler


def _asyncssh() -> Any:
    """asyncssh, an optional dependency; without it web SSH answers 501."""
    try:
        import asyncssh
    except ImportError:
        raise PaiHTTPError(
            501,
            "web SSH needs the asyncssh package on the Jupyter server (pip install asyncssh)",
            code="NotSupported",
        ) from None
    return asyncssh


class PaiWebSsh(Configurable):
    """How the Jupyter server logs into remote OpenPAI tasks for their web terminal."""

    identity = Unicode(
        None,
        allow_none=True,
        config=True,
        help="Private key for web SSH into tasks of a remote OpenPAI profile. Unset: ~/.ssh/id_ed25519, "
        "~/.ssh/id_ecdsa or ~/.ssh/id_rsa of the user running Jupyter. Its public key must be among the "
        "user's OpenPAI SSH keys or the job's userssh value.",
    )
    user = Unicode("root", config=True, help="The login user in the task (OpenPAI's containers: root).")
    connect_timeout = Float(10.0, config=True, help="Seconds to wait for a task's sshd to answer.")


class TaskTerminalHandler(TerminalProxyHandler):
    """The daemon's terminal for an embedded-cluster profile; an SSH session for a remote OpenPAI one."""

    conn: Any = None
    process: Any = None
    pump: asyncio.Task[None] | None = None

    @ws_authenticated
    async def get(self, user: str, name: str, role: str, index: str) -> None:
        client = self.registry.client
        try:
            local = (await client.locality()).embedded
        except PaiError:
            local = True  # let the daemon path say what is wrong
        if local:
            await super().get(user=user, name=name, role=role, index=index)
            return
        if not _is_websocket(self):
            raise PaiHTTPError(400, "this is a websocket endpoint (terminado protocol)", code="WebSocketOnly")
        job = self.registry.job_id(user, name)
        self.conn = await self._connect(job, role, int(index))
        await websocket.WebSocketHandler.get(self)

    async def _connect(self, job: str, role: str, index: int) -> Any:
        """An SSH connection to the task's sshd, its host key checked (kept on first use), or the JSON error."""
        asyncssh = _asyncssh()
        from ..client.ssh import remember_host_key, trusted_host_keys

        settings = PaiWebSsh(parent=self.serverapp)
        t = await self._target(job, role, index, settings)
        trusted = []
        for line in trusted_host_keys(t):
            try:
                trusted.append(asyncssh.import_public_key(line))
            except (asyncssh.KeyImportError, ValueError):
                continue
        if not trusted and not t.trust_first:
            where = f"{t.host}:{t.port}"
            raise PaiHTTPError(502, f"the task's sshd at {where} has not reported its host key yet", code="NoHostKey")
        conn = await self._login(asyncssh, t, trusted, settings)
        shown = conn.get_server_host_key()
        if not trusted and shown is not None:
            remember_host_key(t, shown.export_public_key().decode())
        return conn

    async def _target(self, job: str, role: str, index: int, settings: PaiWebSsh) -> Any:
        """The task's ssh target (``client.ssh.ssh_info``): a running task with a port, and a key to log in with."""
        from ..client.ssh import default_identity, ssh_info

        try:
            await self.registry.client.detail(job)
        except JobNotFound:
            raise not_found() from None
        except PaiError:
            raise PaiHTTPError(
                502, "the cluster did not answer as expected; see the Jupyter server's log", code="ClusterError"
            ) from None
        try:
            targets = await ssh_info(
                self.registry.client, job, role=role, index=index, identity=settings.identity or default_identity()
            )
        except JobNotFound:  # the job is there (above), its config is not
            raise PaiHTTPError(
                409, "the server has no config of this job, so no ssh plugin to log into", code="NoSshPlugin"
            ) from None
        except NotSupported as exc:
            raise PaiHTTPError(409, str(exc), code="NoSshPlugin") from None
        except PaiError as exc:
            if "has no task" in str(exc):
                raise not_found() from None
            raise PaiHTTPError(
                502, "the cluster did not answer as expected; see the Jupyter server's log", code="ClusterError"
            ) from None
        t = targets[0]
        if t.state != "RUNNING" or not t.host or not t.port:
            raise PaiHTTPError(
                409, f"task {role}[{index}] is {t.state}, not running with an ssh port", code="NotRunning"
            )
        if not t.key or not Path(t.key).expanduser().exists():
            raise PaiHTTPError(
                502,
                "no private key for web SSH on this server: set c.PaiWebSsh.identity or create "
                "~/.ssh/id_ed25519 (and add its public key to your OpenPAI profile)",
                code="NoKey",
            )
        return t

    async def _login(self, asyncssh: Any, t: Any, trusted: list[Any], settings: PaiWebSsh) -> Any:
        """Log into the task's sshd with the key alone; each way it can fail is its own 502."""
        where = f"{t.host}:{t.port}"
        try:
            return await asyncssh.connect(
                t.host,
                t.port,
                username=settings.user,
                known_hosts=(trusted, [], []) if trusted else None,  # None: first use, kept by _connect
                client_keys=[str(Path(t.key).expanduser())],
                agent_path=None,
                password=None,
                kbdint_auth=False,
                preferred_auth="publickey",
                connect_timeout=settings.connect_timeout,
            )
        except asyncssh.HostKeyNotVerifiable:
            raise PaiHTTPError(
                502,
                f"the task's sshd at {where} showed a host key other than the one known for it "
                f"(kept in {t.known_hosts}): refused, something else may be answering on that port. If the "
                "task was started again, remove that file and retry",
                code="HostKeyChanged",
            ) from None
        except asyncssh.PermissionDenied:
            raise PaiHTTPError(
                502,
                f"the task's sshd at {where} refused the key {Path(t.key).name} for user "
                f"{settings.user}: add its public key to your OpenPAI SSH keys or the job's userssh",
                code="KeyRefused",
            ) from None
        except (OSError, asyncio.TimeoutError, asyncssh.Error) as exc:
            self.log.info("pai: web ssh to %s failed: %r", where, exc)
            raise PaiHTTPError(
                502,
                f"the task's sshd at {where} does not answer (is the ssh plugin running, the "
                "port reachable from this server?)",
                code="SshUnreachable",
            ) from None

    async def open(self, **kw: Any) -> None:
        if self.conn is None:
            await super().open(**kw)
            return
        try:
            self.process = await self.conn.create_process(
                term_type="xterm-256color", term_size=(80, 24), encoding="utf-8", errors="replace"
            )
        except Exception as exc:
            self.log.info("pai: web ssh session failed: %r", exc)
            self.close(1011, "the task's sshd opened no session")
            return
        self.write_message(json.dumps(["setup", {}]))
        self.pump = asyncio.ensure_future(self._pump())
        self.registry.terminal_opened(self)

    async def _pump(self) -> None:
        try:
            while True:
                data = await self.process.stdout.read(65536)
                if not data:
                    break
                self.write_message(json.dumps(["stdout", data]))
        except (websocket.WebSocketClosedError, OSError):
            return
        except Exception as exc:
            self.log.info("pai: web ssh session ended: %r", exc)
        try:
            self.write_message(json.dumps(["disconnect", 1]))
            self.close(1000, "the ssh session ended")
        except websocket.WebSocketClosedError:
            pass

    def on_message(self, message: str | bytes) -> None:
        if self.conn is None:
            super().on_message(message)
            return
        try:
            kind, *rest = json.loads(message)
        except (ValueError, TypeError):
            return
        self.registry.terminal_used(self)
        if self.process is None:
            return
        if kind == "stdin" and rest and isinstance(rest[0], str):
            self.process.stdin.write(rest[0])
        elif kind == "set_size" and len(rest) >= 2 and all(isinstance(v, int) and 0 < v < 10000 for v in rest[:2]):
            self.process.change_terminal_size(rest[1], rest[0])

    def on_close(self) -> None:
        if self.conn is None:
            super().on_close()
            return
        self.registry.terminal_closed(self)
        if self.pump is not None:
            self.pump.cancel()
        self.conn.close()
