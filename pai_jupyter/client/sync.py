"""The synchronous client (httpx.Client). Every call is defined once in ``calls.Calls``."""

from __future__ import annotations

import time
from collections.abc import Iterator
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


class Client(Calls):
    """One client for any OpenPAI-compatible server: ``Client()`` uses the default profile (``local``)."""

    def __init__(
        self,
        profile: str | Profile | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        **kw: Unpack[ClientOptions],
    ):
        super().__init__(profile, **kw)
        self.transport = transport  # every request goes through it (e.g. httpx.MockTransport in tests)
        self._http = httpx.Client(timeout=self.timeout, follow_redirects=True, transport=transport)
        self._over_socket: dict[str, httpx.Client] = {}

    def _http_for(self, url: str) -> httpx.Client:
        """The httpx client a request for ``url`` goes through: over the daemon's unix socket (``socket_for``),
        else the ordinary one."""
        path = self.socket_for(url)
        if path is None:
            return self._http
        if path not in self._over_socket:
            self._over_socket[path] = httpx.Client(
                timeout=self.timeout, follow_redirects=True, transport=channel.transport(path), trust_env=False
            )
        return self._over_socket[path]

    def close(self) -> None:
        self._http.close()
        for http in self._over_socket.values():
            http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, req: Req) -> httpx.Response:
        for attempt in range(self.retries + 1):
            base, headers = self._prepare(req)
            url = request_url(base, req.path, req.location)
            try:
                resp = self._http_for(url).request(
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
            time.sleep(wait or 0)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _drive(self, op: Op[T]) -> T:
        try:
            item = next(op)
            while True:
                if isinstance(item, Sleep):
                    time.sleep(item.seconds)
                    item = next(op)
                else:
                    item = op.send(self._send(item))
        except StopIteration as stop:
            result: T = stop.value
            return result

    def info(self) -> ServerInfo:
        """The server's /api/v2/info (the embedded cluster adds capacity, runtime and its local routes)."""
        return self._drive(self._info())

    def locality(self) -> Locality:
        """Whether the server is an embedded cluster and whether it is this machine's (see ``client.locality``)."""
        return self._drive(self._locality())

    def submit(
        self,
        job: Job | str | Path,
        *,
        name: str | None = None,
        params: dict[str, Any] | None = None,
        origin: dict[str, Any] | None = None,
    ) -> str:
        """Submit a Job, v2 YAML / v1 JSON text, or a file path; returns the job id ``user~name``. ``origin``
        (``common.origin.gather``): where it came from, for its MLflow run's tags."""
        return self._drive(self._submit(job, name=name, params=params, origin=origin))

    def list_jobs(self, **kw: Unpack[ListArgs]) -> JobList:
        """Jobs as a JobList (``state``, ``user``, ``all_users``, ``keyword``, ``limit``, ``order``)."""
        return self._drive(self._list_jobs(**kw))

    def jobs_with_tasks(self, *, state: str | list[str] | None = None, limit: int = PAGE) -> list[ListedJob]:
        """This user's newest jobs, each live one with its tasks and their services' states, in one request
        (embedded cluster only: NotSupported elsewhere)."""
        return self._drive(self._jobs_with_tasks(state=state, limit=limit))

    def detail(self, job: JobRef) -> JobDetail:
        return self._drive(self._detail(job))

    def stop(self, job: JobRef) -> str:
        return self._drive(self._stop(job))

    def delete(self, job: JobRef) -> str:
        return self._drive(self._delete(job))

    def config(self, job: JobRef) -> str:
        return self._drive(self._config(job))

    def attempts(self, job: JobRef) -> list[JobAttempt]:
        return self._drive(self._attempts(job))

    def events(self, job: JobRef) -> list[JobEvent]:
        return self._drive(self._events(job))

    def clone(self, job: JobRef, *, name: str | None = None) -> str:
        return self._drive(self._clone(job, name=name))

    def logs(self, job: JobRef, **kw: Unpack[LogArgs]) -> str:
        return self._drive(self._logs(job, **kw))

    def wait(self, job: JobRef, **kw: Unpack[WaitArgs]) -> JobDetail:
        return self._drive(self._wait(job, **kw))

    def login(self, username: str, password: str) -> str:
        return self._drive(self._login(username, password))

    def services(self, job: JobRef) -> list[TaskService]:
        return self._drive(self._services(job))

    def service_action(self, job: JobRef, role: str, index: int, name: str, action: str) -> ServiceAction:
        return self._drive(self._service_action(job, role, index, name, action))

    def metrics(self, job: JobRef) -> JobMetrics:
        return self._drive(self._metrics(job))

    def tracking(self) -> Tracking:
        """Where this user's jobs are MLflow runs, and their own MLflow credentials (embedded cluster only)."""
        return self._drive(self._tracking())

    def virtual_clusters(self) -> list[str]:
        """The virtual clusters this profile's user may submit to (the user's ``virtualCluster`` list)."""
        return self._drive(self._virtual_clusters())

    def waiting_queue(self, limit: int | None = None) -> WaitingQueue:
        """The waiting jobs of each virtual cluster, in queue order, as the caller may see them (embedded cluster)."""
        return self._drive(self._waiting_queue(limit))

    def usage(self, window_hours: float | None = None, user: str | None = None) -> Usage:
        """What each user ran in each virtual cluster over the last ``window_hours`` (default a week, embedded
        cluster): your own rows (an admin's: everyone's, or ``user``'s) and every virtual cluster's totals."""
        return self._drive(self._usage(window_hours, user))

    def reports(self, job: JobRef) -> list[Report]:
        """What the job reported (``pai_jupyter.report``, or ``report``), oldest first."""
        return self._drive(self._reports(job))

    def reports_of(self, jobs: list[JobRef]) -> dict[str, list[Report]]:
        """The reports of several jobs in one request (embedded cluster), by job id; one the cluster does not show
        is left out."""
        return self._drive(self._reports_of(jobs))

    def report(self, job: JobRef, *, step: int | None = None, **metrics: float) -> Report:
        """Store metrics with the job (embedded cluster): ``client.report(job, loss=0.1, step=3)``."""
        return self._drive(self._report(job, metrics, step))

    def add_tag(self, job: JobRef, tag: str) -> None:
        self._drive(self._add_tag(job, tag))

    def sweep_state(self, name: str) -> SweepRecord:
        """A sweep's stored record (``pai_jupyter.Sweep`` keeps its state there); JobNotFound when none."""
        return self._drive(self._sweep_state(name))

    def put_sweep_state(self, name: str, state: dict[str, Any], revision: int, *, tag: list[str] | None = None) -> int:
        """Write a sweep's state over ``revision`` (0: new), tagging the jobs in ``tag`` ``sweep:{name}``;
        JobConflict when another driver wrote first."""
        return self._drive(self._put_sweep_state(name, state, revision, tag or []))

    def list_sweeps(self, *, with_state: bool = False) -> list[SweepRecord]:
        """The user's sweeps, newest first (``with_state``: each with its ``state`` document, in the one request)."""
        return self._drive(self._list_sweeps(with_state))

    def delete_sweep(self, name: str) -> None:
        self._drive(self._delete_sweep(name))

    def set_priority(self, job: JobRef, priority: str | None = None, *, position: int | None = None) -> PriorityChange:
        """An admin's: the job's priority class and/or its place among its class's waiting jobs (embedded cluster)."""
        return self._drive(self._set_priority(job, priority, position))

    def set_max_run_time(self, job: JobRef, minutes: float) -> MaxRunTimeChange:
        """Set a live job's max run time in minutes (embedded cluster only; NotSupported elsewhere)."""
        return self._drive(self._set_max_run_time(job, minutes))

    def renew_lease(self, job: JobRef) -> LeaseRenewal:
        """Renew the job's lease (embedded cluster only; NotSupported elsewhere): its length and when it now lapses."""
        return self._drive(self._renew_lease(job))

    def terminal_endpoint(self, job: JobRef, role: str, index: int) -> tuple[str, dict[str, str]]:
        """(websocket url, headers) of a terminal inside a running task (terminado's protocol)."""
        path = self._drive(self._local_path(job, "terminals"))
        base, headers = self._prepare(Req("GET", ""))
        return terminal_url(base, path, role, index), headers

    def follow(
        self, job: JobRef, *, role: str | None = None, index: int = 0, stream: str = "all", poll: float = 1.0
    ) -> Iterator[str]:
        """Yield log text as the task writes it, until the task ends. Uses the server's live stream when it
        advertises one; otherwise polls the 16 KiB tail and yields only lines not seen before."""
        if self.locality().embedded:
            base, headers = self._prepare(Req("GET", ""))
            path, params = self._stream_request(job, role, index, stream)
            try:
                with self._http_for(base).stream(
                    "GET", base + path, params=params, headers=headers, timeout=httpx.Timeout(self.timeout, read=None)
                ) as resp:
                    if resp.status_code >= 400:
                        resp.read()
                        raise error_for(resp, self.where)
                    yield from resp.iter_text()
            except httpx.TransportError as exc:
                raise self._unavailable(exc) from None
            return
        seen: list[str] = []
        while True:
            detail = self.detail(job)
            text = self.logs(job, role=role, index=index, stream=stream, tail=True)
            lines = tail_lines(text, detail.is_final)
            for line in new_lines(seen, lines):
                yield line + "\n"
            seen = lines
            if detail.is_final:
                return
            time.sleep(poll)
