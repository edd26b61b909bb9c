"""The job routes of OpenPAI's v2 REST API: submit, list, detail, stop, clone, config, attempts, events.

Handlers stay thin: authenticate, read arguments, call the Cluster, shape the answer with ``views``.
Every route needs a bearer token except login; a user sees only their own jobs (others' answer 404).
"""

from __future__ import annotations

from typing import Any

import tornado.http1connection
import tornado.httputil
import tornado.ioloop
import tornado.web

from ...common.states import FINAL
from ...protocol import Job, JobValidationError, load_document, masked_text
from ...protocol.edit import rename_text
from ...protocol.parse import MAX_DOCUMENT_BYTES
from ..core.errors import (
    BadRequest,
    InvalidProtocolError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
)
from ..core.store.tracking import run_of
from ..task.estimator import OUTPUTS
from . import views
from .base import JOB, Base, Route

SUBMIT_TYPES = ("text/yaml", "application/yaml", "application/x-yaml", "text/x-yaml", "application/json", "text/plain")


@tornado.web.stream_request_body
class Jobs(Base):
    async def prepare(self) -> None:
        await super().prepare()
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
            raise UnsupportedMediaTypeError(
                f"send the job as text/yaml (v2) or application/json (v1), not {ctype or 'no content type'}"
            )
        body = b"".join(self._chunks)
        try:  # parsing and validating a large document takes a while: not on the event loop
            job = await tornado.ioloop.IOLoop.current().run_in_executor(None, Job.from_text, body)
        except JobValidationError as exc:
            raise InvalidProtocolError("; ".join(str(p) for p in exc.problems), extra=exc.to_dict()) from None
        self.write_json(await self.submit(body, job), 202)

    def get(self) -> None:
        with_total = self.get_argument("withTotalCount", "false").lower() == "true"
        items, total = self.cluster.store.list_json(**list_filters(self), with_total=with_total)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(f'{{"totalCount": {total}, "data": {items}}}' if with_total else items)


def list_filters(handler: Base) -> dict[str, Any]:
    """The list's query (OpenPAI's filters, order and page) as ``Store.list_json`` keywords; a user lists only
    their own jobs, whatever else the filter names."""

    def listed(name: str) -> list[str] | None:
        raw = handler.get_argument(name, "")
        return [v for v in raw.split(",") if v] or None

    users = listed("username")
    if not handler.is_admin:  # "" is no one
        users = [u for u in users or [handler.user["name"]] if u == handler.user["name"]] or [""]
    states = listed("state")
    return {
        "users": users,
        "states": [s.upper() for s in states] if states else None,
        "vcs": listed("vc"),
        "keyword": handler.get_argument("keyword", None),
        "tags_contain": listed("tagsContain"),
        "tags_not_contain": listed("tagsNotContain"),
        "priorities": listed("jobPriority"),
        "order": handler.get_argument("order", "submissionTime,DESC"),
        "offset": handler.int_arg("offset", 0),
        "limit": handler.int_arg("limit", 5000, 1, 50000),
    }


class JobDetail(Base):
    def get(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        job = self.cluster.job_model(row)
        tasks = self.cluster.store.tasks(row["id"], row["attempt"])
        body = views.detail(
            row,
            self.cluster.store.list_item(row["id"]),
            tasks,
            [r.name for r in job.task_roles],
            self.cluster.waiting_reason(row),
        )
        layout = self.cluster.layout(row, job)
        if layout is not None:
            body["jobStatus"]["outputDirs"] = {o: str(layout.output(o)) for o in OUTPUTS}
        run = run_of(self.cluster.store, row["id"])
        if run is not None:  # the job's MLflow run (docs/tracking.md)
            body["jobStatus"].update(mlflowRunId=run.run_id, mlflowExperimentId=run.experiment_id)
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
        self.write_json(await self.submit(body, job), 202)


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
        priority = row["priority"]
        self.write_json(
            [views.attempt_item(row, a, [t for t in tasks if t["attempt"] == a["attempt"]], priority) for a in attempts]
        )


class Events(Base):
    def get(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        events = self.cluster.store.events(row["id"], self.get_argument("type", None))
        first = self.cluster.job_model(row).task_roles[0].name
        self.write_json(
            {"totalCount": len(events), "data": [views.event_item(row, e, first) for e in reversed(events)]}
        )


def routes(args: dict[str, Any]) -> list[Route]:
    return [
        (r"/api/v2/jobs", Jobs, args),
        (JOB, JobDetail, args),
        (JOB + r"/executionType", ExecutionType, args),
        (JOB + r"/config", Config, args),
        (JOB + r"/clone", Clone, args),
        (JOB + r"/job-attempts", Attempts, args),
        (JOB + r"/events", Events, args),
    ]
