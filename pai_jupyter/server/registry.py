"""Where a task's services are and whether anyone uses them: lookup through the one client, start on demand,
idle culling.

The Jupyter server never talks to dockerd or task processes: host and port come only from the cluster's list
of the job's declared services (``AsyncClient.services``), so no other port can be reached, and a job that
is not the profile user's is as absent as a missing one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..client import AsyncClient, JobNotFound, NotSupported, PaiError, TaskService
from ..common.services import titles
from .common import SERVICES, PaiHTTPError, not_found, unavailable
from .config import PaiJupyter
from .ended_tensorboard import EndedBoards
from .mlflow_upstream import TrackingServer

Key = tuple[str, str, int, str]  # job id, role, task index, service
TITLES = titles()
POLL = 0.2


class Closable(Protocol):
    def close(self, code: int | None = None, reason: str | None = None) -> None: ...


@dataclass(frozen=True)
class Target:
    """A running service inside a task: where to connect and what it expects."""

    host: str
    port: int
    base_path: str = "/"
    token: str | None = None
    stamp: str = ""  # the job's stamp (``Registry.stamp``), read after host and port: the job they belong to


@dataclass
class Entry:
    target: Target | None = None
    resolved_at: float = 0.0
    last_used: float = field(default_factory=time.monotonic)
    sockets: set[Closable] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Registry:
    """Resolves ``(user, job, role, index, service)`` to a Target and culls services idle too long."""

    def __init__(self, client: AsyncClient, config: PaiJupyter, log: logging.Logger | None = None):
        self.config = config
        self.clients: dict[str, AsyncClient] = {client.profile.name: client}
        self.current = client.profile.name
        self.log = log or logging.getLogger("pai_jupyter.server")
        self.entries: dict[Key, Entry] = {}
        self.terminals: dict[Closable, float] = {}
        self._culler: asyncio.Task[None] | None = None
        self.ended = EndedBoards()  # TensorBoards over ended tasks' logdirs
        self.stamps: dict[str, tuple[float, str]] = {}  # job id -> (when asked, its submission time)
        self.mlflow = TrackingServer(self)  # the user's MLflow server (the Lab's MLflow tab, the job page's hint)

    @property
    def client(self) -> AsyncClient:
        """The client of the profile this server shows now (see ``select``)."""
        return self.clients[self.current]

    def select(self, name: str) -> AsyncClient:
        """Show the Jupyter user's profile ``name`` from now on (their own clusters.yaml); 404 for an unknown one.

        Clients are kept per profile; the service targets resolved for the previous profile are dropped."""
        if name not in self.clients:
            try:
                self.clients[name] = AsyncClient(name)
            except PaiError:
                raise not_found() from None
        if name != self.current:
            self.entries.clear()
            self.stamps.clear()
            self.current = name
        return self.clients[name]

    @property
    def user(self) -> str:
        return self.client.username

    def job_id(self, user: str, name: str) -> str:
        """``user~name`` of a job this server may reach; 404 for anyone else's."""
        if user != self.client.username:
            raise not_found()
        return f"{user}~{name}"

    async def stamp(self, user: str, name: str) -> str:
        """Which job ``user~name`` is: its submission time (a job deleted and submitted again under the same name is
        another job). A capability for a task page is bound to it, as the daemon binds a log token to the job's row.
        Asked again after ``resolve_cache_seconds``, and whenever a service's host and port are; 404 for a missing
        job."""
        job = self.job_id(user, name)
        cached = self.stamps.get(job)
        if cached is not None and time.monotonic() - cached[0] < self.config.resolve_cache_seconds:
            return cached[1]
        return await self._read_stamp(job)

    async def _read_stamp(self, job: str) -> str:
        try:
            status = (await self.client.detail(job)).job_status
        except PaiError as exc:
            raise unavailable(exc) from None
        when = status.submission_time or status.created_time
        stamp = str(round(when.timestamp() * 1000)) if when else ""
        now = time.monotonic()
        if len(self.stamps) > 1000:
            self.stamps = {k: v for k, v in self.stamps.items() if now - v[0] < self.config.resolve_cache_seconds}
        self.stamps[job] = (now, stamp)
        return stamp

    # ---- services --------------------------------------------------------------------------------------------
    async def services(self, job: str) -> list[TaskService]:
        try:
            return list(await self.client.services(job))
        except PaiError as exc:
            if not isinstance(exc, (JobNotFound, NotSupported)):
                self.log.warning("pai: services of %s: %s", job, exc)
            raise unavailable(exc) from None

    async def _item(self, key: Key) -> TaskService:
        job, role, index, service = key
        for item in await self.services(job):
            if (item.role, item.index, item.name) == (role, index, service):
                return item
        raise not_found()

    async def resolve(self, user: str, name: str, role: str, index: int, service: str) -> tuple[Key, Target]:
        """The running service, started first when it was stopped (culled); 503 while it is still starting.

        The job's stamp is read again after each lookup and kept with the target: a capability is checked against
        the job the address it is forwarded to belongs to (were the stamp older than the address, a capability of
        a deleted job would open the job submitted again under its name)."""
        key: Key = (self.job_id(user, name), role, index, service)
        if service not in SERVICES:
            raise not_found()
        entry = self.entries.get(key)
        if entry is None or not self._fresh(entry):
            entry = self.entries.setdefault(key, Entry())
            async with entry.lock:
                if not self._fresh(entry):
                    try:
                        target = await self._running(key)
                        entry.target = replace(target, stamp=await self._read_stamp(key[0]))
                    except PaiHTTPError as exc:
                        if exc.status_code == 404:
                            self.entries.pop(key, None)
                        raise
                    entry.resolved_at = time.monotonic()
        entry.last_used = time.monotonic()
        assert entry.target is not None
        return key, entry.target

    def _fresh(self, entry: Entry) -> bool:
        return entry.target is not None and time.monotonic() - entry.resolved_at < self.config.resolve_cache_seconds

    async def _running(self, key: Key) -> Target:
        title = TITLES[key[3]]
        item = await self._item(key)
        deadline = time.monotonic() + self.config.service_start_timeout
        started = False
        while item.state != "running":
            if item.state in ("stopped", "stopping"):
                if started:
                    raise PaiHTTPError(
                        409, f"{title} of this task is stopped: the task is not running", code="NotRunning"
                    )
                try:
                    await self._start(key)
                except PaiHTTPError as exc:  # the task has ended: its TensorBoard's logdir, served from here
                    if exc.status_code != 409 or key[3] != "tensorboard":
                        raise
                    host, port, token = await self.ended.target(key[0], key[1], key[2], item.logdir)
                    return Target(host=host, port=port, token=token)
                started = True
            elif time.monotonic() >= deadline:
                raise PaiHTTPError(
                    503,
                    f"{title} of this task is still starting; try again in a few seconds",
                    retry_after=2,
                    code="Starting",
                )
            else:
                await asyncio.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
            item = await self._item(key)
        return Target(
            host=item.host,
            port=item.port,
            base_path=item.base_path or "/",
            token=item.token,
        )

    async def _start(self, key: Key) -> None:
        """Start a stopped (culled) service again; 409 when its task is not running."""
        job, role, index, service = key
        self.log.info("pai: starting %s of %s %s[%d] again (requested while stopped)", service, job, role, index)
        try:
            await self.client.service_action(job, role, index, service, "start")
        except PaiError as exc:
            if isinstance(exc, (JobNotFound, NotSupported)):
                raise unavailable(exc) from None
            raise PaiHTTPError(
                409,
                f"{TITLES[service]} of this task cannot start: the task is not running (yet, or any more)",
                code="NotRunning",
            ) from None

    def forget(self, key: Key) -> None:
        """Ask the cluster again next time (the service did not answer at the port we had)."""
        entry = self.entries.get(key)
        if entry is not None:
            entry.target = None

    def touch(self, key: Key | None) -> None:
        entry = self.entries.get(key) if key else None
        if entry is not None:
            entry.last_used = time.monotonic()

    def socket_opened(self, key: Key, ws: Closable) -> None:
        self.entries.setdefault(key, Entry()).sockets.add(ws)

    def socket_closed(self, key: Key | None, ws: Closable) -> None:
        entry = self.entries.get(key) if key else None
        if entry is not None:
            entry.sockets.discard(ws)

    # ---- terminals -------------------------------------------------------------------------------------------
    async def terminal(self, user: str, name: str, role: str, index: int) -> tuple[str, dict[str, str], str | None]:
        """The cluster's terminal websocket for a running task: (ws url, headers with the profile's token, the unix
        socket to reach it through: the local daemon's, so the token never crosses loopback TCP; None: TCP)."""
        job = self.job_id(user, name)
        try:
            detail = await self.client.detail(job)
            task = next((t for t in detail.tasks if t.role == role and t.task_index == index), None)
            if task is None:
                raise not_found()
            if task.task_state != "RUNNING":
                raise PaiHTTPError(409, "the task is not running, so it has no terminal", code="NotRunning")
            endpoint = self.client.terminal_endpoint(job, role, index)
            url, headers = await endpoint if inspect.isawaitable(endpoint) else endpoint
        except PaiError as exc:
            raise unavailable(exc) from None
        return str(url), dict(headers), self.client.socket_for(str(url))

    def terminal_opened(self, ws: Closable) -> None:
        self.terminals[ws] = time.monotonic()

    def terminal_used(self, ws: Closable) -> None:
        if ws in self.terminals:
            self.terminals[ws] = time.monotonic()

    def terminal_closed(self, ws: Closable) -> None:
        self.terminals.pop(ws, None)

    # ---- idle culling ----------------------------------------------------------------------------------------
    @property
    def idle_seconds(self) -> float:
        return max(0.0, self.config.idle_timeout_minutes * 60.0)

    def start_culling(self) -> None:
        if self.idle_seconds > 0 and self._culler is None:
            self._culler = asyncio.get_running_loop().create_task(self._cull_forever())

    async def _cull_forever(self) -> None:
        every = min(60.0, max(0.5, self.idle_seconds / 4))
        while True:
            await asyncio.sleep(every)
            try:
                await self.cull_once()
            except Exception:  # keep culling whatever one round met
                self.log.exception("pai: idle culling failed")

    async def cull_once(self) -> list[Key]:
        """Stop the services and close the terminals nobody used for ``idle_timeout_minutes``."""
        idle = self.idle_seconds
        if idle <= 0:
            return []
        now = time.monotonic()
        culled: list[Key] = []
        for key, entry in list(self.entries.items()):
            if entry.target is None or entry.lock.locked() or now - entry.last_used < idle:
                continue
            job, role, index, service = key
            try:
                await self.client.service_action(job, role, index, service, "stop")
            except PaiError as exc:
                self.log.info("pai: not culling %s of %s %s[%d]: %s", service, job, role, index, exc)
                self.entries.pop(key, None)
                continue
            self.log.info(
                "pai: stopped %s of %s %s[%d], idle for %.0f s", service, job, role, index, now - entry.last_used
            )
            entry.target = None
            for ws in list(entry.sockets):
                ws.close(1001, "the service was stopped after being idle")
            culled.append(key)
        self.ended.cull(idle)
        for ws, last in list(self.terminals.items()):
            if now - last >= idle:
                self.log.info("pai: closing a terminal idle for %.0f s", now - last)
                ws.close(1001, "the terminal was idle")
                self.terminals.pop(ws, None)
        return culled
