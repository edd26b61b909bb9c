"""Task log routes: OpenPAI's log locations (each with a short-lived token, so a location is fetched with no
header), a log file's tail, whole bytes or ``Range``, and the local follow-as-it-grows stream."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from tornado.iostream import StreamClosedError

from ...common.states import FINAL
from ..core.errors import BadRequest, NoTaskLogError, NotFoundError, RangeNotSatisfiable, UnauthorizedUserError
from ..core.store import JobCore, TaskRow
from ..runtime.taskdir import LOGS, RUNTIME_LOG
from ..task.logs import LogSigner, RangeError, byte_range, follow, log_names, log_size, read_chunks, read_log
from .base import JOB, MAX_INT, Base, Route, authenticate

if TYPE_CHECKING:
    from ..core.service import Cluster


def _task(cluster: Cluster, row: JobCore, attempt: str, role: str, idx: str) -> TaskRow:
    if int(attempt) > MAX_INT or int(idx) > MAX_INT:
        raise NotFoundError(f"job {row['user']}~{row['name']} has no task {role}[{idx}] in attempt {attempt}")
    task = cluster.store.task(row["id"], int(attempt), role, int(idx))
    if task is None:
        raise NotFoundError(f"job {row['user']}~{row['name']} has no task {role}[{idx}] in attempt {attempt}")
    return task


def _logs_dir(cluster: Cluster, row: JobCore, task: TaskRow, task_attempt: int) -> Path:
    """Where this task attempt's runtime keeps its logs (the task directory, or its ``run/`` on Docker)."""
    return cluster.runtime.logs_dir(cluster.task_dir(row, task["attempt"], task["role"], task["idx"], task_attempt))


PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)+$")


def _log_scope(row: JobCore, attempt: str, role: str, idx: str, task_attempt: str) -> str:
    """What a log token is good for: one task attempt of one job, by the job's row and submission time (a job
    deleted and submitted again under the same name, even into the same row id, is another job, whose logs an
    old token must not read)."""
    if max(len(attempt), len(idx), len(task_attempt)) > 10:
        raise NoTaskLogError("Log of task is not found.")
    job = f"{row['id']}.{row['submission_time']}:{row['user']}~{row['name']}"
    return f"{job}/{int(attempt)}/{role}/{int(idx)}/{int(task_attempt)}"


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
        query = {"token": self.signer.sign(_log_scope(row, attempt, role, idx, task_attempt))}
        if (self.get_argument("tail-mode", None) or self.get_argument("tailMode", "false")).lower() == "true":
            query["tail-mode"] = "true"  # (OpenPAI's JS SDK sends tailMode)
        prefix = self.request.headers.get("X-Forwarded-Prefix", "").rstrip("/")  # behind a gateway's path
        prefix = prefix if PREFIX.match(prefix) else ""
        base = (
            f"{prefix}/api/v2/local/logs/{quote(user)}~{quote(name)}/{int(attempt)}/{quote(role, safe='')}/"
            f"{int(idx)}/{int(task_attempt)}"
        )
        names = log_names(_logs_dir(self.cluster, row, task, int(task_attempt)))
        self.write_json({"locations": [{"name": n, "uri": f"{base}/{n}?{urlencode(query)}"} for n in names]})


class LogFile(Base):
    """A log's bytes: the 16 KiB tail, or the whole file (or a ``Range`` of it) sent in chunks. Takes the
    location's own ``token`` (no header needed) or the usual bearer token."""

    public = True

    def initialize(self, cluster: Cluster, signer: LogSigner) -> None:  # type: ignore[override]
        super().initialize(cluster)
        self.signer = signer

    async def get(self, user: str, name: str, attempt: str, role: str, idx: str, task_attempt: str, log: str) -> None:
        token = self.get_argument("token", None)
        if token is not None:
            found = self.cluster.store.job(user, name)
            if found is None or not self.signer.check(_log_scope(found, attempt, role, idx, task_attempt), token):
                raise UnauthorizedUserError(
                    "this log location's token is wrong or has expired; ask for the locations again"
                )
            row = found
        else:
            self.user = await authenticate(self.request, self.cluster, self.hub)
            row = self.own_job(user, name)
        task = _task(self.cluster, row, attempt, role, idx)
        if int(task_attempt) > task["task_attempt"]:
            raise NoTaskLogError("Log of task is not found.")
        folder = _logs_dir(self.cluster, row, task, int(task_attempt))
        if log not in log_names(folder):
            raise NoTaskLogError(f"Log of task is not found: no {log!r} log.")
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        if self.get_argument("tail-mode", "false").lower() == "true":
            self.finish(read_log(folder, log, tail=True))
            return
        await self._send(folder, log)

    async def _send(self, folder: Path, log: str) -> None:
        size = log_size(folder, log)
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
            for chunk in read_chunks(folder, log, start, end):
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
        if stream not in (*LOGS, RUNTIME_LOG):
            raise BadRequest(f"stream must be one of {', '.join((*LOGS, RUNTIME_LOG))}")
        attempt = self.int_arg("attempt", row["attempt"])
        task = _task(self.cluster, row, str(attempt), role, str(idx))
        store = self.cluster.store
        task_attempt = task["task_attempt"]
        folder = _logs_dir(self.cluster, row, task, task["task_attempt"])

        def done() -> bool:
            cur = store.task(row["id"], attempt, task["role"], idx)
            job = store.job_by_id(row["id"])
            if cur is None or job is None:
                return True
            return (
                cur["task_attempt"] != task_attempt
                or cur["state"] in FINAL
                or (cur["state"] == "WAITING" and job["state"] in FINAL)
            )

        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("X-Accel-Buffering", "no")
        try:
            async for data in follow(folder, stream, done, start=0):
                self.write(data)
                await self.flush()
        except StreamClosedError:
            return
        self.finish()


def routes(args: dict[str, Any]) -> list[Route]:
    log_args = {**args, "signer": LogSigner()}
    return [
        (JOB + r"/attempts/(\d+)/taskRoles/([^/]+)/taskIndex/(\d+)/attempts/(\d+)/logs", LogLocations, log_args),
        (r"/api/v2/local/logs/([^/~]+)~([^/]+)/(\d+)/([^/]+)/(\d+)/(\d+)/([a-z]+)", LogFile, log_args),
        (r"/api/v2/local/jobs/([^/~]+)~([^/]+)/logs/stream", LogStream, args),
    ]
