"""Tornado handlers for the OpenPAI v2 REST subset (and local extensions under /api/v2/local/).

Handlers stay thin: authenticate, read arguments, call the Cluster, shape the answer with ``views``.
Every route needs a bearer token except login; a user sees only their own jobs (others' answer 404).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import tornado.http1connection
import tornado.httputil
import tornado.ioloop
import tornado.web
from tornado.iostream import StreamClosedError

from ..common.states import FINAL
from ..protocol import Job, JobValidationError, load_document, masked_text
from ..protocol.edit import rename_text
from ..protocol.parse import MAX_DOCUMENT_BYTES
from . import views
from .errors import (
    ApiError,
    BadRequest,
    ForbiddenUserError,
    InvalidProtocolError,
    NoApiError,
    NoJobError,
    NoTaskLogError,
    NotFoundError,
    PayloadTooLargeError,
    RangeNotSatisfiable,
    UnauthorizedUserError,
    UnsupportedMediaTypeError,
)
from .estimator import OUTPUTS
from .logs import LogSigner, RangeError, byte_range, follow, log_names, read_chunks, read_log
from .runtime.taskdir import LOGS
from .service import Cluster
from .space import is_full

JOB = r"/api/v2/jobs/([^/~]+)~([^/]+)"
Route = tuple[str, type[tornado.web.RequestHandler], dict[str, Any]]  # a pattern, its handler, its arguments
MAX_INT = 2**31 - 1  # attempt and task numbers, offsets: anything larger is no real one (and overflows SQLite)
SUBMIT_TYPES = ("text/yaml", "application/yaml", "application/x-yaml", "text/x-yaml", "application/json",
                "text/plain")


def authenticate(request: tornado.httputil.HTTPServerRequest, cluster: Cluster) -> dict[str, Any]:
    """The user of the request's bearer token; 401 without one or with a wrong one."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    user = cluster.store.user_for_token(token.strip()) if scheme.lower() == "bearer" and token else None
    if user is None:
        raise UnauthorizedUserError("a valid bearer token is required (Authorization: Bearer <token>)")
    return user


def visible_job(cluster: Cluster, viewer: dict[str, Any], user: str, name: str) -> dict[str, Any]:
    """The job, if this viewer may see it; someone else's job is as absent as a missing one."""
    if user != viewer["name"] and not viewer["admin"]:
        raise NoJobError(f"job {user}~{name} was not found")
    return cluster.get_job(user, name)


class Base(tornado.web.RequestHandler):
    cluster: Cluster
    user: dict[str, Any]
    public = False

    def initialize(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")

    def prepare(self) -> None:
        if not self.public:
            self.user = authenticate(self.request, self.cluster)

    @property
    def is_admin(self) -> bool:
        return bool(self.user["admin"])

    def write_json(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(data))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            body = exc.body()
            for name, value in exc.headers.items():  # (send_error cleared the headers set before)
                self.set_header(name, value)
        elif isinstance(exc, tornado.web.HTTPError) and status_code == 405:
            body = {"code": "MethodNotAllowedError", "message": f"{self.request.method} is not allowed here"}
        else:
            body = {"code": "UnknownError", "message": f"HTTP {status_code}: {self._reason}"}
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(body))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, ApiError) or is_full(value):
            return
        super().log_exception(typ, value, tb)

    def _handle_request_exception(self, e: BaseException) -> None:
        if is_full(e):  # a full disk is a 507 that says where, not a 500
            e = self.cluster.space.error(f"{self.request.method} {self.request.path} failed")
        if isinstance(e, ApiError):
            if self._finished:
                return
            self.send_error(e.status, exc_info=(type(e), e, None))
            return
        super()._handle_request_exception(e)

    def own_job(self, user: str, name: str) -> dict[str, Any]:
        return visible_job(self.cluster, self.user, user, name)

    def json_body(self) -> dict[str, Any]:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            raise BadRequest("the body must be a JSON object") from None
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    def int_arg(self, name: str, default: int, lo: int = 0, hi: int | None = None) -> int:
        raw = self.get_argument(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise BadRequest(f"{name} must be an integer, got {raw!r}") from None
        if value < lo or value > (MAX_INT if hi is None else hi):
            raise BadRequest(f"{name} must be between {lo} and {hi if hi is not None else MAX_INT}")
        return value


@tornado.web.stream_request_body
class Jobs(Base):
    def prepare(self) -> None:
        super().prepare()
        self._chunks: list[bytes] = []
        self._size = 0
        self._too_big = False
        if self.request.method == "POST":
            connection = self.request.connection
            if isinstance(connection, tornado.http1connection.HTTP1Connection):
                connection.set_max_body_size(64 * MAX_DOCUMENT_BYTES)

    def data_received(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > MAX_DOCUMENT_BYTES:
            self._too_big = True
            self._chunks = []
        elif not self._too_big:
            self._chunks.append(chunk)

    async def post(self) -> None:
        if self._too_big:
            raise PayloadTooLargeError(f"the job document is over {MAX_DOCUMENT_BYTES} bytes")
        ctype = self.request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype not in SUBMIT_TYPES:
            raise UnsupportedMediaTypeError(f"send the job as text/yaml (v2) or application/json (v1), not "
                                            f"{ctype or 'no content type'}")
        body = b"".join(self._chunks)
        try:  # parsing and validating a large document takes a while: not on the event loop
            job = await tornado.ioloop.IOLoop.current().run_in_executor(None, Job.from_text, body)
        except JobValidationError as exc:
            raise InvalidProtocolError("; ".join(str(p) for p in exc.problems), extra=exc.to_dict()) from None
        result = self.cluster.submit(self.user["name"], body, admin=self.is_admin, job=job)
        self.write_json(result, 202)

    def get(self) -> None:
        def listed(name: str) -> list[str] | None:
            raw = self.get_argument(name, "")
            return [v for v in raw.split(",") if v] or None

        users = listed("username")
        if not self.is_admin:  # a user lists only their own jobs, whatever else the filter names ("" is no one)
            users = [u for u in users or [self.user["name"]] if u == self.user["name"]] or [""]
        states = listed("state")
        if states:
            states = [s.upper() for s in states]
        with_total = self.get_argument("withTotalCount", "false").lower() == "true"
        items, total = self.cluster.store.list_json(
            users=users, states=states, vcs=listed("vc"), keyword=self.get_argument("keyword", None),
            order=self.get_argument("order", "submissionTime,DESC"), offset=self.int_arg("offset", 0),
            limit=self.int_arg("limit", 5000, 1, 50000), with_total=with_total)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(f'{{"totalCount": {total}, "data": {items}}}' if with_total else items)


class JobDetail(Base):
    def get(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        job = self.cluster.job_model(row)
        tasks = self.cluster.store.tasks(row["id"], row["attempt"])
        body = views.detail(row, self.cluster.store.list_item(row["id"]), tasks, [r.name for r in job.task_roles],
                            self.cluster.waiting_reason(row))
        layout = self.cluster.layout(row, job)
        if layout is not None:
            body["jobStatus"]["outputDirs"] = {o: str(layout.output(o)) for o in OUTPUTS}
        self.write_json(body)

    def delete(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        self.cluster.delete(row)
        self.write_json({"message": f"job {row['user']}~{row['name']} deleted"})


class ExecutionType(Base):
    def put(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        value = self.json_body().get("value")
        if value == "STOP":
            self.cluster.stop(row, f"stopped by {self.user['name']}")
        elif value == "START":  # a no-op for a live job, as in OpenPAI; an ended one is cloned, not restarted
            if row["state"] in FINAL or row["execution_type"] != "START":
                raise BadRequest("a stopped or finished job cannot be started again; clone it instead")
        else:
            raise BadRequest('the body must be {"value": "STOP"}')
        self.write_json({"message": f"execution type of {row['user']}~{row['name']} set to {value}"}, 202)


class Clone(Base):
    """Local extension: submit the stored original (secrets included) again under a new name."""

    async def post(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        new = self.json_body().get("name")
        if not isinstance(new, str) or not new:
            raise BadRequest('the body must be {"name": "<new job name>"}')
        try:
            text = rename_text(row["config_text"], new)
        except JobValidationError as exc:
            raise BadRequest(str(exc)) from None
        body = text.encode("utf-8")
        try:  # parsed off the event loop, as a submission is
            job = await tornado.ioloop.IOLoop.current().run_in_executor(None, Job.from_text, body)
        except JobValidationError as exc:
            raise InvalidProtocolError("; ".join(str(p) for p in exc.problems), extra=exc.to_dict()) from None
        self.write_json(self.cluster.submit(self.user["name"], body, admin=self.is_admin, job=job), 202)


class Config(Base):
    def get(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        text = row["config_text"]
        masked = masked_text(text, load_document(text))
        self.set_header("Content-Type", "text/yaml; charset=utf-8")  # OpenPAI's type, for JSON (YAML too) as well
        self.finish(masked)


class Attempts(Base):
    def get(self, user: str, name: str) -> None:
        """OpenPAI's order: the latest attempt, then the earlier ones from the first."""
        row = self.own_job(user, name)
        tasks = self.cluster.store.tasks(row["id"])
        attempts = self.cluster.store.attempts(row["id"])
        attempts = attempts[:1] + attempts[:0:-1]
        self.write_json([views.attempt_item(row, a, [t for t in tasks if t["attempt"] == a["attempt"]])
                         for a in attempts])


class Events(Base):
    def get(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        events = self.cluster.store.events(row["id"], self.get_argument("type", None))
        self.write_json({"totalCount": len(events), "data": [views.event_item(row, e) for e in reversed(events)]})


def _task(cluster: Cluster, row: dict[str, Any], attempt: str, role: str, idx: str) -> dict[str, Any]:
    if int(attempt) > MAX_INT or int(idx) > MAX_INT:
        raise NotFoundError(f"job {row['user']}~{row['name']} has no task {role}[{idx}] in attempt {attempt}")
    task = cluster.store.task(row["id"], int(attempt), role, int(idx))
    if task is None:
        raise NotFoundError(f"job {row['user']}~{row['name']} has no task {role}[{idx}] in attempt {attempt}")
    return task


def _log_path(cluster: Cluster, row: dict[str, Any], task: dict[str, Any], task_attempt: int) -> Path:
    return cluster.task_dir(row, task["attempt"], task["role"], task["idx"], task_attempt)


PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)+$")


def _log_scope(user: str, name: str, attempt: str, role: str, idx: str, task_attempt: str) -> str:
    if max(len(attempt), len(idx), len(task_attempt)) > 10:
        raise NoTaskLogError("Log of task is not found.")
    return f"{user}~{name}/{int(attempt)}/{role}/{int(idx)}/{int(task_attempt)}"


class LogLocations(Base):
    """OpenPAI's first log step: where each log is. Each location carries a token for that task's logs
    (valid ``LogSigner.ttl`` seconds), so it is fetched with no header, as the portal fetches OpenPAI's."""

    def initialize(self, cluster: Cluster, signer: LogSigner) -> None:  # type: ignore[override]
        super().initialize(cluster)
        self.signer = signer

    def get(self, user: str, name: str, attempt: str, role: str, idx: str, task_attempt: str) -> None:
        row = self.own_job(user, name)
        task = _task(self.cluster, row, attempt, role, idx)
        if int(task_attempt) > task["task_attempt"]:
            raise NoTaskLogError("Log of task is not found.")  # (also any overflowing number)
        query = {"token": self.signer.sign(_log_scope(user, name, attempt, role, idx, task_attempt))}
        if (self.get_argument("tail-mode", None) or self.get_argument("tailMode", "false")).lower() == "true":
            query["tail-mode"] = "true"  # (OpenPAI's JS SDK sends tailMode)
        prefix = self.request.headers.get("X-Forwarded-Prefix", "").rstrip("/")  # behind a gateway's path
        prefix = prefix if PREFIX.match(prefix) else ""
        base = (f"{prefix}/api/v2/local/logs/{quote(user)}~{quote(name)}/{int(attempt)}/{quote(role, safe='')}/"
                f"{int(idx)}/{int(task_attempt)}")
        names = log_names(_log_path(self.cluster, row, task, int(task_attempt)))
        self.write_json({"locations": [{"name": n, "uri": f"{base}/{n}?{urlencode(query)}"} for n in names]})


class LogFile(Base):
    """A log's bytes: the 16 KiB tail, or the whole file (or a ``Range`` of it) sent in chunks. Takes the
    location's own ``token`` (no header needed) or the usual bearer token."""

    public = True

    def initialize(self, cluster: Cluster, signer: LogSigner) -> None:  # type: ignore[override]
        super().initialize(cluster)
        self.signer = signer

    async def get(self, user: str, name: str, attempt: str, role: str, idx: str, task_attempt: str,
                  log: str) -> None:
        token = self.get_argument("token", None)
        if token is not None:
            if not self.signer.check(_log_scope(user, name, attempt, role, idx, task_attempt), token):
                raise UnauthorizedUserError("this log location's token is wrong or has expired; ask for the "
                                            "locations again")
            row = self.cluster.get_job(user, name)
        else:
            self.user = authenticate(self.request, self.cluster)
            row = self.own_job(user, name)
        task = _task(self.cluster, row, attempt, role, idx)
        if int(task_attempt) > task["task_attempt"]:
            raise NoTaskLogError("Log of task is not found.")
        folder = _log_path(self.cluster, row, task, int(task_attempt))
        if log not in log_names(folder):
            raise NoTaskLogError(f"Log of task is not found: no {log!r} log.")
        path = folder / log
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        if self.get_argument("tail-mode", "false").lower() == "true":
            self.finish(read_log(path, tail=True))
            return
        await self._send(path)

    async def _send(self, path: Path) -> None:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        self.set_header("Accept-Ranges", "bytes")
        try:
            wanted = byte_range(self.request.headers.get("Range"), size)
        except RangeError as exc:
            error = RangeNotSatisfiable(str(exc))
            error.headers["Content-Range"] = f"bytes */{size}"
            raise error from None
        start, end = wanted if wanted else (0, size - 1)
        if wanted:
            self.set_status(206)
            self.set_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.set_header("Content-Length", str(max(end - start + 1, 0)))
        if end < start:
            self.finish()
            return
        try:
            for chunk in read_chunks(path, start, end):
                self.write(chunk)
                await self.flush()
        except StreamClosedError:
            return
        self.finish()


class LogStream(Base):
    """Live log over chunked HTTP: bytes as the task writes them; ends when the task has ended."""

    async def get(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        role = self.get_argument("role", None) or self.cluster.job_model(row).task_roles[0].name
        idx = self.int_arg("index", 0)
        stream = self.get_argument("stream", "all")
        if stream not in LOGS:
            raise BadRequest(f"stream must be one of {', '.join(LOGS)}")
        attempt = self.int_arg("attempt", row["attempt"])
        task = _task(self.cluster, row, str(attempt), role, str(idx))
        store = self.cluster.store
        task_attempt = task["task_attempt"]
        path = _log_path(self.cluster, row, task, task["task_attempt"]) / stream

        def done() -> bool:
            cur = store.task(row["id"], attempt, task["role"], idx)
            job = store.job_by_id(row["id"])
            if cur is None or job is None:
                return True
            return (cur["task_attempt"] != task_attempt or cur["state"] in FINAL or
                    (cur["state"] == "WAITING" and job["state"] in FINAL))

        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("X-Accel-Buffering", "no")
        try:
            async for data in follow(path, done, start=0):
                self.write(data)
                await self.flush()
        except StreamClosedError:
            return
        self.finish()


class Users(Base):
    def post(self) -> None:
        if not self.is_admin:
            raise ForbiddenUserError("only an admin can add users")
        body = self.json_body()
        name = body.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name):
            raise BadRequest("a user name starts with a letter or digit, then letters, digits, '-', '_' and '.' "
                             "(at most 64)")
        admin, password = body.get("admin", False), body.get("password")
        if not isinstance(admin, bool):
            raise BadRequest("admin must be true or false")
        if password is not None and (not isinstance(password, str) or len(password) < 6):
            raise BadRequest("a password must be a string of at least 6 characters")
        store = self.cluster.store
        self.cluster.admit_user(name)
        store.ensure_user(name, admin=admin)
        if password:
            store.set_password(name, password)
        self.write_json({"name": name, "token": store.new_token(name, "created by admin")}, 201)


class NotFound(Base):
    def prepare(self) -> None:
        super().prepare()
        raise NoApiError(f"API {self.request.path} is not found.")


def make_app(cluster: Cluster) -> tornado.web.Application:
    args = {"cluster": cluster}
    log_args = {**args, "signer": LogSigner()}
    logs = JOB + r"/attempts/(\d+)/taskRoles/([^/]+)/taskIndex/(\d+)/attempts/(\d+)/logs"
    routes: list[Route] = [
        (r"/api/v2/jobs", Jobs, args),
        (JOB, JobDetail, args),
        (JOB + r"/executionType", ExecutionType, args),
        (JOB + r"/config", Config, args),
        (JOB + r"/clone", Clone, args),
        (JOB + r"/job-attempts", Attempts, args),
        (JOB + r"/events", Events, args),
        (logs, LogLocations, log_args),
        (r"/api/v2/local/logs/([^/~]+)~([^/]+)/(\d+)/([^/]+)/(\d+)/(\d+)/([a-z]+)", LogFile, log_args),
        (r"/api/v2/local/jobs/([^/~]+)~([^/]+)/logs/stream", LogStream, args),
        (r"/api/v2/local/users", Users, args),
    ]
    from .api_openpai import routes as openpai_routes
    from .api_tasks import routes as task_routes

    routes += openpai_routes(args)
    routes += task_routes(JOB.replace("/api/v2/jobs/", "/api/v2/local/jobs/"), args)
    from .api_ssh import routes as ssh_routes

    routes += ssh_routes(JOB.replace("/api/v2/jobs/", "/api/v2/local/jobs/"), args)
    from .api_maxruntime import routes as max_run_time_routes

    routes += max_run_time_routes(JOB.replace("/api/v2/jobs/", "/api/v2/local/jobs/"), args)
    return PaiApplication(routes, default_handler_class=NotFound, default_handler_args=args,
                          compress_response=False, max_body_size=64 * MAX_DOCUMENT_BYTES)


class PaiApplication(tornado.web.Application):
    """Routes match with or without a trailing slash, as OpenPAI's (Express) do: its JS SDK asks for
    ``/api/v2/users/``."""

    def find_handler(self, request: tornado.httputil.HTTPServerRequest, **kwargs: Any) -> Any:
        if len(request.path) > 1 and request.path.endswith("/"):
            request.path = request.path.rstrip("/") or "/"
        return super().find_handler(request, **kwargs)
