"""The client's calls, written once as generators that yield requests (and sleeps) — no I/O here.

``Client`` drives them with httpx.Client, ``AsyncClient`` with httpx.AsyncClient, so the sync and async
clients cannot drift; the options they share are typed once here (``ListArgs``, ``LogArgs``, ``WaitArgs``). Job
ids and paging live here too; what a call yields and error mapping in ``wire``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from pathlib import Path
from typing import Any, TypeAlias, TypedDict
from urllib.parse import parse_qs, quote, urlsplit

from ..common.origin import HEADER as ORIGIN_HEADER
from ..common.origin import encode as encode_origin
from ..protocol import Job, JobValidationError, load_document
from ..protocol.edit import rename_text, with_parameters
from ..protocol.load import withholds_secrets
from .base import ClientBase
from .errors import BadRequest, InvalidJob, NotSupported, PaiError
from .locality import Locality, locality
from .models import (
    FINAL_STATES,
    JobAttempt,
    JobDetail,
    JobEvent,
    JobList,
    JobMetrics,
    JobSummary,
    LeaseRenewal,
    ListedJob,
    MaxRunTimeChange,
    PriorityChange,
    Report,
    ServerInfo,
    ServiceAction,
    SweepRecord,
    TaskService,
    TaskStatus,
    Tracking,
    Usage,
    WaitingQueue,
)
from .wire import Op as Op
from .wire import Req as Req
from .wire import Sleep as Sleep
from .wire import error_for as error_for
from .wire import json_list, json_object

PAGE = 1000
REPORTS_PER_REQUEST = 100  # job ids in one reports query (the daemon takes 1000; this keeps the URL short)

JobRef: TypeAlias = str | JobSummary | JobDetail
"""A job: its id ``user~name``, a bare name (this profile's user), or a row or detail the client returned."""


class ListArgs(TypedDict, total=False):
    """``list_jobs``'s options, shared by Client and AsyncClient."""

    state: str | list[str] | None
    user: str | None
    all_users: bool
    keyword: str | None
    limit: int | None
    order: str


class LogArgs(TypedDict, total=False):
    """``logs``'s options, shared by Client and AsyncClient."""

    role: str | None
    index: int
    stream: str
    tail: bool
    attempt: int | None
    task_attempt: int | None


class WaitArgs(TypedDict, total=False):
    """``wait``'s options, shared by Client and AsyncClient."""

    until: Set[str]
    timeout: float | None
    on_update: Callable[[JobDetail], None] | None


def _is_file(text: str) -> bool:
    """A one-line string that names an existing file (job text itself is never a path)."""
    if "\n" in text or text.lstrip().startswith("{") or len(text) > 4096:
        return False
    try:
        return Path(text).is_file()
    except OSError:
        return False


def as_job_text(
    job: Job | str | Path, *, name: str | None = None, params: dict[str, Any] | None = None
) -> tuple[str, str, str]:
    """(text, format v1|v2, job name) of what to submit; kept verbatim unless a name or parameters change it."""
    if isinstance(job, Job):
        text = job.source_text or job.to_yaml()
    elif isinstance(job, Path) or _is_file(job):
        text = Path(job).read_text(encoding="utf-8")
    else:
        text = str(job)
    try:
        parsed = Job.from_text(text)
    except JobValidationError as exc:
        raise InvalidJob(
            str(exc), status=None, code="InvalidProtocolError", body={"problems": [p.to_dict() for p in exc.problems]}
        ) from None
    if params:
        text = with_parameters(text, params)
    if name:
        text = rename_text(text, name)
    return text, parsed.source_format, name or parsed.name


class Calls(ClientBase):
    """Every server call, as a generator (see ``wire.Op``); Client and AsyncClient drive them."""

    def job_id(self, job: JobRef) -> str:
        """``user~name``; a bare name means this profile's user."""
        if isinstance(job, (JobSummary, JobDetail)):
            return job.id
        return job if "~" in job else f"{self.username}~{job}"

    def _path(self, job: JobRef) -> str:
        user, _, name = self.job_id(job).partition("~")
        return f"/api/v2/jobs/{quote(user, safe='')}~{quote(name, safe='')}"

    # ---- calls -----------------------------------------------------------------------------------------------
    def _info(self) -> Op[ServerInfo]:
        resp = yield Req("GET", "/api/v2/info")
        return ServerInfo.model_validate(json_object(resp))

    def _locality(self) -> Op[Locality]:
        """Where the server is (``locality``), asked once: the local profile needs no request. An error from
        /api/v2/info is raised (the driver raises it; the next call asks again)."""
        if self._server is None:
            info = yield from self._info()
            self._server = locality(self.profile, info)
        return self._server

    def _is_local_server(self) -> Op[bool]:
        """Whether the server is an embedded cluster (it serves the local-only routes)."""
        found = yield from self._locality()
        return found.embedded

    def _submit(
        self,
        job: Job | str | Path,
        *,
        name: str | None = None,
        params: dict[str, Any] | None = None,
        origin: dict[str, Any] | None = None,
    ) -> Op[str]:
        text, fmt, job_name = as_job_text(job, name=name, params=params)
        local = yield from self._is_local_server()
        if fmt == "v1" and not local:  # OpenPAI's v2 endpoint takes YAML only
            text, ctype = Job.from_text(text).to_yaml(), "text/yaml"
        else:
            ctype = "application/json" if text.lstrip().startswith("{") else "text/yaml"
        headers = {"Content-Type": ctype}
        if origin and local:  # (beside the document, which stays as written: common/origin.py)
            headers[ORIGIN_HEADER] = encode_origin(origin)
        resp = yield Req("POST", "/api/v2/jobs", content=text.encode("utf-8"), headers=headers, idempotent=False)
        body = json_object(resp) if resp.content else {}
        return f"{body.get('username') or self.username}~{body.get('name') or job_name}"

    def _list_jobs(
        self,
        *,
        state: str | list[str] | None = None,
        user: str | None = None,
        all_users: bool = False,
        keyword: str | None = None,
        limit: int | None = None,
        order: str = "submissionTime,DESC",
    ) -> Op[JobList]:
        params: dict[str, Any] = {"order": order, "withTotalCount": "true"}
        if state:
            params["state"] = ",".join([state] if isinstance(state, str) else state).upper()
        if user or not all_users:
            params["username"] = user or self.username
        if keyword:
            params["keyword"] = keyword
        out = JobList()
        offset = 0
        while limit is None or len(out) < limit:
            page = PAGE if limit is None else min(PAGE, limit - len(out))
            resp = yield Req("GET", "/api/v2/jobs", params={**params, "offset": offset, "limit": page})
            body = resp.json()
            items = body.get("data") if isinstance(body, dict) else body
            if not isinstance(items, list):
                raise PaiError(f"the job list from {self.where} has no data array")
            out.extend(JobSummary.model_validate(i) for i in items)
            offset += len(items)
            total = body.get("totalCount") if isinstance(body, dict) else None
            if len(items) < page or (total is not None and offset >= total):
                break
        return out

    def _jobs_with_tasks(self, *, state: str | list[str] | None = None, limit: int = PAGE) -> Op[list[ListedJob]]:
        """This user's newest jobs, each live one with its tasks and their services' states, in one request (the
        embedded cluster's ``/api/v2/local/jobs``); NotSupported on an OpenPAI server (a detail per job there)."""
        local = yield from self._is_local_server()
        if not local:
            raise NotSupported(f"the job list with tasks needs the embedded cluster; {self.where} is an OpenPAI server")
        params: dict[str, Any] = {"order": "submissionTime,DESC", "username": self.username, "limit": limit}
        if state:
            params["state"] = ",".join([state] if isinstance(state, str) else state).upper()
        resp = yield Req("GET", "/api/v2/local/jobs", params=params)
        return [ListedJob.model_validate(item) for item in json_list(resp)]

    def _detail(self, job: JobRef) -> Op[JobDetail]:
        resp = yield Req("GET", self._path(job))
        return JobDetail.from_api(json_object(resp))

    def _stop(self, job: JobRef) -> Op[str]:
        yield Req("PUT", self._path(job) + "/executionType", json={"value": "STOP"})
        return self.job_id(job)

    def _delete(self, job: JobRef) -> Op[str]:
        yield Req("DELETE", self._path(job))
        return self.job_id(job)

    def _config(self, job: JobRef) -> Op[str]:
        resp = yield Req("GET", self._path(job) + "/config")
        return resp.text

    def _attempts(self, job: JobRef) -> Op[list[JobAttempt]]:
        resp = yield Req("GET", self._path(job) + "/job-attempts")
        return [JobAttempt.model_validate(a) for a in json_list(resp)]

    def _events(self, job: JobRef) -> Op[list[JobEvent]]:
        """The job's events, oldest first (OpenPAI answers newest first; ISO timestamps sort as text)."""
        resp = yield Req("GET", self._path(job) + "/events")
        data = json_object(resp).get("data") or []
        events = [JobEvent.model_validate(e) for e in reversed(data) if isinstance(e, dict)]
        return sorted(events, key=lambda e: e.last_timestamp or "")

    def _clone(self, job: JobRef, *, name: str | None = None) -> Op[str]:
        """Submit the job's exact config again under a new name (default: ``<name>_<hex>``).

        On the embedded cluster the daemon clones from the stored original, so secrets are kept; a remote
        OpenPAI serves the config with its ``secrets`` block withheld (``******``), so a job with secrets cannot
        be cloned there: InvalidJob says to submit the original document again.
        """
        source = self.job_id(job)
        new = name or f"{source.partition('~')[2][:240]}_{time.time_ns() % 16**6:06x}"
        local = yield from self._is_local_server()
        if local:
            resp = yield Req("POST", self._path(job) + "/clone", json={"name": new}, idempotent=False)
            body = json_object(resp)
            return f"{body['username']}~{body['name']}"
        text = yield from self._config(job)
        if withholds_secrets(load_document(text)):
            raise InvalidJob(
                f"{source} has secrets, which the cluster withholds from its config (secrets: ******): "
                "a clone cannot carry them; submit the original document with a new name instead",
                code="InvalidProtocolError",
                body={"problems": [{"path": "secrets", "message": "withheld by the cluster"}]},
            )
        result = yield from self._submit(text, name=new)
        return result

    def _logs(
        self,
        job: JobRef,
        *,
        role: str | None = None,
        index: int = 0,
        stream: str = "all",
        tail: bool = False,
        attempt: int | None = None,
        task_attempt: int | None = None,
    ) -> Op[str]:
        """A task's log (stdout, stderr or all): the whole file, or its last 16 KiB with ``tail``."""
        detail = yield from self._detail(job)
        task = _pick_task(detail, role, index)
        a = detail.job_status.attempt_id if attempt is None else attempt
        ta = (task.task_attempt_id or 0) if task_attempt is None else task_attempt
        path = (
            f"{self._path(job)}/attempts/{a or 0}/taskRoles/{quote(task.role, safe='')}/taskIndex/{index}"
            f"/attempts/{ta}/logs"
        )
        resp = yield Req("GET", path, params={"tail-mode": "true"} if tail else None)
        locations = json_object(resp).get("locations") or []
        uris = {loc["name"]: loc["uri"] for loc in locations}
        if stream not in uris:
            raise BadRequest(f"no {stream!r} log; the server offers {', '.join(uris) or 'none'}")
        uri = str(uris[stream])
        resp = yield Req("GET", uri, location=True, auth=not carries_own_token(uri))
        return resp.text

    def _wait(
        self,
        job: JobRef,
        *,
        until: Set[str] = FINAL_STATES,
        timeout: float | None = None,
        on_update: Callable[[JobDetail], None] | None = None,
    ) -> Op[JobDetail]:
        """Poll the detail (10 per second at first, then once a second) until the state is in ``until``."""
        from .errors import WaitTimeout

        start = time.monotonic()
        delay = 0.1
        while True:
            detail = yield from self._detail(job)
            if on_update:
                on_update(detail)
            if detail.state in until:
                return detail
            if timeout is not None and time.monotonic() - start > timeout:
                raise WaitTimeout(f"{self.job_id(job)} is still {detail.state} after {timeout:g} s")
            yield Sleep(delay)
            delay = min(delay * 1.3, 1.0)

    def _tracking(self) -> Op[Tracking]:
        """Where this user's jobs are MLflow runs: the server's ``url``, their ``experiment`` (and its id), and
        their own MLflow ``username`` and ``password``; NotSupported where the cluster tracks nothing."""
        local = yield from self._is_local_server()
        if not local:
            raise NotSupported(f"MLflow tracking needs the embedded cluster; {self.where} is an OpenPAI server")
        resp = yield Req("GET", "/api/v2/local/tracking")
        return Tracking.model_validate(json_object(resp))

    def _local_path(self, job: JobRef, what: str) -> Op[str]:
        """The path of a local-only route, or NotSupported on a server that is not an embedded cluster."""
        local = yield from self._is_local_server()
        if not local:
            raise NotSupported(f"{what} needs the embedded cluster; {self.where} is an OpenPAI server without it")
        return self._path(job).replace("/api/v2/jobs/", "/api/v2/local/jobs/", 1)

    def _services(self, job: JobRef) -> Op[list[TaskService]]:
        """The services running inside the job's tasks (TensorBoard, Jupyter): host, port, state, token."""
        path = yield from self._local_path(job, "task services")
        resp = yield Req("GET", path + "/services")
        return [TaskService.model_validate(s) for s in json_list(resp)]

    def _service_action(self, job: JobRef, role: str, index: int, name: str, action: str) -> Op[ServiceAction]:
        path = yield from self._local_path(job, "task services")
        resp = yield Req(
            "POST", f"{path}/services/{quote(role, safe='')}/{index}/{name}", json={"action": action}, idempotent=False
        )
        return ServiceAction.model_validate(json_object(resp))

    def _metrics(self, job: JobRef) -> Op[JobMetrics]:
        """Per-task CPU %, memory and GPU use (see the daemon's /metrics route)."""
        path = yield from self._local_path(job, "metrics")
        resp = yield Req("GET", path + "/metrics")
        return JobMetrics.model_validate(json_object(resp))

    def _set_max_run_time(self, job: JobRef, minutes: float) -> Op[MaxRunTimeChange]:
        """Set a waiting or running job's max run time ("work duration", minutes from its launch)."""
        path = yield from self._local_path(job, "setting the max run time of a running job")
        resp = yield Req("PUT", path + "/maxRunTime", json={"minutes": minutes})
        return MaxRunTimeChange.model_validate(json_object(resp))

    def _renew_lease(self, job: JobRef) -> Op[LeaseRenewal]:
        """Renew the lease the job declares (``extras["com.pai_jupyter.lease"]``)."""
        path = yield from self._local_path(job, "renewing a job's lease")
        resp = yield Req("PUT", path + "/lease")
        return LeaseRenewal.model_validate(json_object(resp))

    def _set_priority(self, job: JobRef, priority: str | None, position: int | None) -> Op[PriorityChange]:
        """An admin gives a job a priority class (crit, prod, test, oppo, default) and/or, while it waits, a place
        among the waiting jobs of its class (0: first); the answer has ``jobPriority`` and ``ahead``."""
        path = yield from self._local_path(job, "changing a job's priority")
        body: dict[str, Any] = {} if priority is None else {"jobPriority": priority}
        if position is not None:
            body["position"] = position
        resp = yield Req("PUT", path + "/priority", json=body)
        return PriorityChange.model_validate(json_object(resp))

    def _virtual_clusters(self) -> Op[list[str]]:
        """The virtual clusters this profile's user may submit to: the ``virtualCluster`` list of
        ``GET /api/v2/users/{user}``, as OpenPAI and the embedded cluster answer it."""
        if not self.username:
            raise PaiError(f"the profile {self.profile.name!r} names no user; set its username")
        resp = yield Req("GET", f"/api/v2/users/{quote(self.username, safe='')}")
        vcs = json_object(resp).get("virtualCluster")
        return [str(v) for v in vcs] if isinstance(vcs, list) else []

    def _waiting_queue(self, limit: int | None = None) -> Op[WaitingQueue]:
        """The waiting jobs of each virtual cluster in queue order, as the caller may see them (an admin all, a
        user their own), each with its place, class and why it waits; ``canReorder``: whether the caller may."""
        local = yield from self._is_local_server()
        if not local:
            raise NotSupported(f"the waiting queue needs the embedded cluster; {self.where} is an OpenPAI server")
        resp = yield Req("GET", "/api/v2/local/queue", params={"limit": limit} if limit else None)
        return WaitingQueue.model_validate(json_object(resp))

    def _usage(self, window_hours: float | None = None, user: str | None = None) -> Op[Usage]:
        """What each user ran in each virtual cluster over the last ``window_hours`` (default a week): the caller's
        own rows (an admin's: everyone's, or ``user``'s) and every virtual cluster's totals (embedded cluster)."""
        local = yield from self._is_local_server()
        if not local:
            raise NotSupported(f"usage needs the embedded cluster; {self.where} is an OpenPAI server")
        params: dict[str, Any] = {}
        if window_hours is not None:
            params["window"] = window_hours
        if user is not None:
            params["user"] = user
        resp = yield Req("GET", "/api/v2/local/usage", params=params or None)
        return Usage.model_validate(json_object(resp))

    def _reports(self, job: JobRef) -> Op[list[Report]]:
        """What the job reported (``pai_jupyter.report``), oldest first."""
        path = yield from self._local_path(job, "reported metrics")
        resp = yield Req("GET", path + "/reports")
        return [Report.model_validate(r) for r in json_object(resp).get("reports") or []]

    def _reports_of(self, jobs: list[JobRef]) -> Op[dict[str, list[Report]]]:
        """The reports of several jobs in one request, by job id; a job the cluster does not show is left out."""
        local = yield from self._is_local_server()
        if not local:
            raise NotSupported(f"reported metrics need the embedded cluster; {self.where} is an OpenPAI server")
        ids, out = [self.job_id(j) for j in jobs], dict[str, list[Report]]()
        for start in range(0, len(ids), REPORTS_PER_REQUEST):
            chunk = ids[start : start + REPORTS_PER_REQUEST]
            resp = yield Req("GET", "/api/v2/local/reports", params={"job": chunk})
            found = json_object(resp).get("reports")
            if isinstance(found, dict):
                out.update({str(k): [Report.model_validate(r) for r in v] for k, v in found.items()})
        return out

    def _report(self, job: JobRef, metrics: dict[str, float], step: int | None) -> Op[Report]:
        path = yield from self._local_path(job, "reporting metrics")
        resp = yield Req("POST", path + "/reports", json={"metrics": metrics, "step": step}, idempotent=False)
        return Report.model_validate(json_object(resp))

    def _add_tag(self, job: JobRef, tag: str) -> Op[None]:
        yield Req("PUT", self._path(job) + "/tag", json={"value": tag})

    def _sweep_path(self, name: str) -> Op[str]:
        user, _, sweep = (name if "~" in name else f"{self.username}~{name}").partition("~")
        local = yield from self._is_local_server()
        if not local:
            raise NotSupported(f"sweep state needs the embedded cluster; {self.where} is an OpenPAI server")
        return f"/api/v2/local/sweeps/{quote(user, safe='')}~{quote(sweep, safe='')}"

    def _sweep_state(self, name: str) -> Op[SweepRecord]:
        """A sweep's stored record, its state document with it."""
        path = yield from self._sweep_path(name)
        resp = yield Req("GET", path)
        return SweepRecord.model_validate(json_object(resp))

    def _put_sweep_state(self, name: str, state: dict[str, Any], revision: int, tag: list[str]) -> Op[int]:
        path = yield from self._sweep_path(name)
        body = {"state": state, "revision": revision, "tag": [self.job_id(j) for j in tag]}
        resp = yield Req("PUT", path, json=body)
        return int(json_object(resp)["revision"])

    def _list_sweeps(self, with_state: bool) -> Op[list[SweepRecord]]:
        yield from self._sweep_path("x")
        resp = yield Req("GET", "/api/v2/local/sweeps", params={"state": "1"} if with_state else None)
        return [SweepRecord.model_validate(r) for r in json_object(resp).get("sweeps") or []]

    def _delete_sweep(self, name: str) -> Op[None]:
        path = yield from self._sweep_path(name)
        yield Req("DELETE", path, idempotent=False)

    def _stream_request(self, job: JobRef, role: str | None, index: int, stream: str) -> tuple[str, dict[str, Any]]:
        """(path, params) of the embedded cluster's live log stream of a task (``follow``)."""
        params: dict[str, Any] = {"index": index, "stream": stream}
        if role:
            params["role"] = role
        return self._path(job).replace("/api/v2/jobs/", "/api/v2/local/jobs/", 1) + "/logs/stream", params

    def _login(self, username: str, password: str) -> Op[str]:
        resp = yield Req(
            "POST",
            "/api/v2/authn/basic/login",
            json={"username": username, "password": password, "expiration": 7 * 24 * 3600},
            auth=False,
        )
        return str(json_object(resp)["token"])


def carries_own_token(uri: str) -> bool:
    """A location with its own credential in the query (OpenPAI's log-manager ``token``, a blob SAS ``sig``):
    the REST token must not travel to it."""
    query = parse_qs(urlsplit(uri).query)
    return bool(query.get("token") or query.get("sig"))


def _pick_task(detail: JobDetail, role: str | None, index: int) -> TaskStatus:
    roles = list(dict.fromkeys(t.role for t in detail.tasks))
    role = role or (roles[0] if roles else None)
    for t in detail.tasks:
        if t.role == role and t.task_index == index:
            return t
    raise BadRequest(f"{detail.id} has no task {role}[{index}] (roles: {', '.join(roles)})")


def new_lines(previous: list[str], current: list[str]) -> list[str]:
    """Lines of a polled tail that were not in the previous poll (the tail window slides, so align on overlap)."""
    if not previous:
        return current
    for k in range(min(len(previous), len(current)), 0, -1):
        if previous[-k:] == current[:k]:
            return current[k:]
    return current
