"""The asynchronous client (httpx.AsyncClient), driving the same calls as ``Client``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from ..common import channel
from ..protocol import Job
from .base import ClientOptions, request_url, tail_lines, terminal_url
from .calls import PAGE, Calls, JobRef, ListArgs, LogArgs, WaitArgs, new_lines
from .locality import Locality
from .models import (
    JobAttempt,
    JobDetail,
    JobEvent,
    JobList,
    JobMetrics,
    LeaseRenewal,
    ListedJob,
    MaxRunTimeChange,
    PriorityChange,
    Report,
    ServerInfo,
    ServiceAction,
    SweepRecord,
    TaskService,
    Tracking,
    Usage,
    WaitingQueue,
)
from .profiles import Profile
from .wire import Op, Req, Sleep, error_for

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")


class AsyncClient(Calls):
    """``async with AsyncClient() as pai: await pai.submit(job)`` — same methods as Client, awaited."""

    def __init__(
        self,
        profile: str | Profile | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        **kw: Unpack[ClientOptions],
    ):
        super().__init__(profile, **kw)
        self.transport = transport  # every request goes through it (e.g. httpx.MockTransport in tests)
        self._http = httpx.AsyncClient(timeout=self.timeout, follow_redirects=True, transport=transport)
        self._over_socket: dict[str, httpx.AsyncClient] = {}

    def _http_for(self, url: str) -> httpx.AsyncClient:
        """Client._http_for's twin: over the daemon's unix socket for its url, else the ordinary client."""
        path = self.socket_for(url)
        if path is None:
            return self._http
        if path not in self._over_socket:
            self._over_socket[path] = httpx.AsyncClient(
                timeout=self.timeout, follow_redirects=True, transport=channel.async_transport(path), trust_env=False
            )
        return self._over_socket[path]

    async def aclose(self) -> None:
        await self._http.aclose()
        for http in self._over_socket.values():
            await http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, req: Req) -> httpx.Response:
        for attempt in range(self.retries + 1):
            base, headers = await asyncio.to_thread(self._prepare, req) if self._url is None else self._prepare(req)
            url = request_url(base, req.path, req.location)
            try:
                resp = await self._http_for(url).request(
                    req.method,
                    url,
                    params=req.params,
                    json=req.json,
                    content=req.content,
                    headers=headers,
                )
                done, wait, err = self._outcome(req, attempt, resp=resp)
            except httpx.TransportError as exc:
                done, wait, err = self._outcome(req, attempt, exc=exc)
            if err is not None:
                raise err
            if done is not None:
                return done
            await asyncio.sleep(wait or 0)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _drive(self, op: Op[T]) -> T:
        try:
            item = next(op)
            while True:
                if isinstance(item, Sleep):
                    await asyncio.sleep(item.seconds)
                    item = next(op)
                else:
                    item = op.send(await self._send(item))
        except StopIteration as stop:
            result: T = stop.value
            return result

    async def info(self) -> ServerInfo:
        return await self._drive(self._info())

    async def locality(self) -> Locality:
        """Whether the server is an embedded cluster and whether it is this machine's (see ``client.locality``)."""
        return await self._drive(self._locality())

    async def submit(
        self,
        job: Job | str | Path,
        *,
        name: str | None = None,
        params: dict[str, Any] | None = None,
        origin: dict[str, Any] | None = None,
    ) -> str:
        return await self._drive(self._submit(job, name=name, params=params, origin=origin))

    async def list_jobs(self, **kw: Unpack[ListArgs]) -> JobList:
        return await self._drive(self._list_jobs(**kw))

    async def jobs_with_tasks(self, *, state: str | list[str] | None = None, limit: int = PAGE) -> list[ListedJob]:
        """This user's newest jobs, each live one with its tasks and their services' states, in one request
        (embedded cluster only: NotSupported elsewhere)."""
        return await self._drive(self._jobs_with_tasks(state=state, limit=limit))

    async def detail(self, job: JobRef) -> JobDetail:
        return await self._drive(self._detail(job))

    async def stop(self, job: JobRef) -> str:
        return await self._drive(self._stop(job))

    async def delete(self, job: JobRef) -> str:
        return await self._drive(self._delete(job))

    async def config(self, job: JobRef) -> str:
        return await self._drive(self._config(job))

    async def attempts(self, job: JobRef) -> list[JobAttempt]:
        return await self._drive(self._attempts(job))

    async def events(self, job: JobRef) -> list[JobEvent]:
        return await self._drive(self._events(job))

    async def clone(self, job: JobRef, *, name: str | None = None) -> str:
        return await self._drive(self._clone(job, name=name))

    async def logs(self, job: JobRef, **kw: Unpack[LogArgs]) -> str:
        return await self._drive(self._logs(job, **kw))

    async def wait(self, job: JobRef, **kw: Unpack[WaitArgs]) -> JobDetail:
        return await self._drive(self._wait(job, **kw))

    async def login(self, username: str, password: str) -> str:
        return await self._drive(self._login(username, password))

    async def services(self, job: JobRef) -> list[TaskService]:
        return await self._drive(self._services(job))

    async def service_action(self, job: JobRef, role: str, index: int, name: str, action: str) -> ServiceAction:
        return await self._drive(self._service_action(job, role, index, name, action))

    async def metrics(self, job: JobRef) -> JobMetrics:
        return await self._drive(self._metrics(job))

    async def tracking(self) -> Tracking:
        """Where this user's jobs are MLflow runs, and their own MLflow credentials (embedded cluster only)."""
        return await self._drive(self._tracking())

    async def virtual_clusters(self) -> list[str]:
        """The virtual clusters this profile's user may submit to (the user's ``virtualCluster`` list)."""
        return await self._drive(self._virtual_clusters())

    async def waiting_queue(self, limit: int | None = None) -> WaitingQueue:
        """The waiting jobs of each virtual cluster, in queue order, as the caller may see them (embedded cluster)."""
        return await self._drive(self._waiting_queue(limit))

    async def usage(self, window_hours: float | None = None, user: str | None = None) -> Usage:
        """What each user ran in each virtual cluster over the last ``window_hours`` (default a week, embedded
        cluster): your own rows (an admin's: everyone's, or ``user``'s) and every virtual cluster's totals."""
        return await self._drive(self._usage(window_hours, user))

    async def reports(self, job: JobRef) -> list[Report]:
        """What the job reported (``pai_jupyter.report``, or ``report``), oldest first."""
        return await self._drive(self._reports(job))

    async def reports_of(self, jobs: list[JobRef]) -> dict[str, list[Report]]:
        """The reports of several jobs in one request (embedded cluster), by job id; one the cluster does not show
        is left out."""
        return await self._drive(self._reports_of(jobs))

    async def report(self, job: JobRef, *, step: int | None = None, **metrics: float) -> Report:
        """Store metrics with the job (embedded cluster): ``client.report(job, loss=0.1, step=3)``."""
        return await self._drive(self._report(job, metrics, step))

    async def add_tag(self, job: JobRef, tag: str) -> None:
        await self._drive(self._add_tag(job, tag))

    async def sweep_state(self, name: str) -> SweepRecord:
        """A sweep's stored record (``pai_jupyter.Sweep`` keeps its state there); JobNotFound when none."""
        return await self._drive(self._sweep_state(name))

    async def put_sweep_state(
        self, name: str, state: dict[str, Any], revision: int, *, tag: list[str] | None = None
    ) -> int:
        """Write a sweep's state over ``revision`` (0: new), tagging the jobs in ``tag`` ``sweep:{name}``;
        JobConflict when another driver wrote first."""
        return await self._drive(self._put_sweep_state(name, state, revision, tag or []))

    async def list_sweeps(self, *, with_state: bool = False) -> list[SweepRecord]:
        """The user's sweeps, newest first (``with_state``: each with its ``state`` document, in the one request)."""
        return await self._drive(self._list_sweeps(with_state))

    async def delete_sweep(self, name: str) -> None:
        await self._drive(self._delete_sweep(name))

    async def set_priority(
        self, job: JobRef, priority: str | None = None, *, position: int | None = None
    ) -> PriorityChange:
        """An admin's: the job's priority class and/or its place among its class's waiting jobs (embedded cluster)."""
        return await self._drive(self._set_priority(job, priority, position))

    async def set_max_run_time(self, job: JobRef, minutes: float) -> MaxRunTimeChange:
        """Set a live job's max run time in minutes (embedded cluster only; NotSupported elsewhere)."""
        return await self._drive(self._set_max_run_time(job, minutes))

    async def renew_lease(self, job: JobRef) -> LeaseRenewal:
        """Renew the job's lease (embedded cluster only; NotSupported elsewhere): its length and when it now lapses."""
        return await self._drive(self._renew_lease(job))

    async def terminal_endpoint(self, job: JobRef, role: str, index: int) -> tuple[str, dict[str, str]]:
        path = await self._drive(self._local_path(job, "terminals"))
        base, headers = await asyncio.to_thread(self._prepare, Req("GET", ""))
        return terminal_url(base, path, role, index), headers

    async def follow(
        self, job: JobRef, *, role: str | None = None, index: int = 0, stream: str = "all", poll: float = 1.0
    ) -> AsyncIterator[str]:
        """Async twin of Client.follow: the live stream where advertised, else the polled tail."""
        if (await self.locality()).embedded:
            base, headers = await asyncio.to_thread(self._prepare, Req("GET", ""))
            path, params = self._stream_request(job, role, index, stream)
            try:
                async with self._http_for(base).stream(
                    "GET", base + path, params=params, headers=headers, timeout=httpx.Timeout(self.timeout, read=None)
                ) as resp:
                    if resp.status_code >= 400:
                        await resp.aread()
                        raise error_for(resp, self.where)
                    async for chunk in resp.aiter_text():
                        yield chunk
            except httpx.TransportError as exc:
                raise self._unavailable(exc) from None
            return
        seen: list[str] = []
        while True:
            detail = await self.detail(job)
            lines = tail_lines(await self.logs(job, role=role, index=index, stream=stream, tail=True), detail.is_final)
            for line in new_lines(seen, lines):
                yield line + "\n"
            seen = lines
            if detail.is_final:
                return
            await asyncio.sleep(poll)
