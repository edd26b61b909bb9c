"""What the JupyterLab panel needs beyond the job list: one job's detail, config, events and logs, the row
actions (stop, clone, delete), and server-side validation and submission of the Lab form.

Everything goes through the profile's one client (``registry.client``); a job that is not the profile user's
is a 404 like a missing one. Validation uses the protocol package (one source of rules, the same as the
widget form, ``pai validate`` and the daemon), and answers each problem with its field path so the form can
show it beside the field. Writes are Jupyter API calls: cookie-authenticated ones need ``_xsrf``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tornado import web

from ..client import FINAL_STATES, InvalidJob, JobConflict, JobEvent, PaiError, TaskService
from ..client import JobDetail as ClientJobDetail
from ..common.services import icons, links
from ..protocol import load as protocol_load
from ..protocol.errors import JobValidationError
from ..protocol.parse import dump_yaml, load_document
from ..protocol.v1 import job_to_form_v1
from .answers import Event, JobDetail, TaskDetail, Validation
from .common import JOB_RE, PaiHTTPError, task_prefix
from .ended_tensorboard import local_logdir
from .jobs import job_fields
from .lab_base import LabHandler
from .lab_form import placed
from .mlflow_proxy import run_page

STREAMS = ("all", "stdout", "stderr")


def _iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def event_json(event: JobEvent) -> Event:
    """One of the cluster's events as the job page reads it: ``time`` is when it last happened; a field the
    cluster left out is left out."""
    out: Event = {}
    if event.time is not None:
        out["time"] = event.time
    if event.type is not None:
        out["type"] = event.type
    if event.reason is not None:
        out["reason"] = event.reason
    if event.message is not None:
        out["message"] = event.message
    return out


def detail_json(base_url: str, detail: ClientJobDetail, services: Sequence[TaskService] = ()) -> JobDetail:
    """A job's status and tasks as the job page shows them, with each running task's services (``{name, title,
    url}``, from the cluster's list of the job's services: only those the task has)."""
    s = detail.job_status
    user, name = s.username, s.name
    tasks: list[TaskDetail] = []
    for t in detail.tasks:
        prefix = task_prefix(base_url, user, name, t.role, t.task_index)
        running = t.task_state == "RUNNING"
        own = [x.name for x in services if (x.role, x.index) == (t.role, t.task_index)]
        tasks.append(
            {
                "role": t.role,
                "index": t.task_index,
                "state": t.task_state,
                "ip": t.container_ip,
                "ports": t.container_ports or {},
                "exitCode": t.container_exit_code,
                "diagnostics": t.container_exit_diagnostics,
                "retries": t.retries,
                "launchedTime": _iso(t.launched_time),
                "completedTime": _iso(t.completed_time),
                "terminalPage": f"{prefix}terminal/" if running else None,
                "services": links(base_url, user, name, t.role, t.task_index, own) if running else [],
            }
        )
    # (mypy cannot tell that a JobFields holds none of JobDetail's optional keys; each key here is still checked)
    return {
        **job_fields(base_url, s),  # type: ignore[typeddict-item]
        "final": s.state in FINAL_STATES,
        "exitCode": s.app_exit_code,
        "diagnostics": s.app_exit_diagnostics,
        "waitingReason": s.waiting_reason,
        "tasks": tasks,
        "mlflowPage": run_page(base_url, s.mlflow_experiment_id, s.mlflow_run_id),
        "serviceIcons": icons(),
    }


class JobHandler(LabHandler):
    """``GET`` a job's detail (with ``?events=1`` its events); ``DELETE`` removes an ended job."""

    @web.authenticated
    async def get(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        detail = await self.call(f"detail of {job}", self.client.detail(job))
        services: list[TaskService] = []
        if detail.job_status.state not in FINAL_STATES:
            try:
                services = list(await self.client.services(job))
            except PaiError as exc:  # NotSupported on a remote OpenPAI: no service buttons, the terminal stays
                self.log.info("pai: services of %s: %s", job, exc)
        out = detail_json(self.base_url, detail, services)
        out["mlflowHint"] = None if out["mlflowPage"] else await self.registry.mlflow.hint()
        if out["final"]:
            await self.ended_tensorboards(job, out)
        if self.get_argument("events", "") == "1":
            try:
                out["events"] = [event_json(e) for e in await self.client.events(job)]
            except PaiError as exc:
                out["events"], out["eventsMessage"] = [], f"no events: {exc.message}"
        self.send(out)

    async def ended_tensorboards(self, job: str, out: JobDetail) -> None:
        """An ended job still offers each task's TensorBoard whose logdir is on this machine (started on demand
        over it: ``ended_tensorboard``)."""
        try:
            services = await self.client.services(job)
        except PaiError:
            return
        user, _, name = job.partition("~")
        boards = {(s.role, s.index) for s in services if s.name == "tensorboard" and local_logdir(s.logdir) is not None}
        for t in out["tasks"]:
            if (t["role"], t["index"]) in boards:
                t["tensorboardPage"] = task_prefix(self.base_url, user, name, t["role"], t["index"]) + "tensorboard/"

    @web.authenticated
    async def delete(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        await self.call(f"delete {job}", self.client.delete(job))
        self.send({"id": job, "deleted": True})


class JobActionHandler(LabHandler):
    """``POST …/stop`` and ``POST …/clone`` (``{"name": optional}``)."""

    @web.authenticated
    async def post(self, user: str, name: str, action: str) -> None:
        job = self.registry.job_id(user, name)
        if action == "stop":
            await self.call(f"stop {job}", self.client.stop(job))
            self.send({"id": job, "stopping": True})
            return
        body = self.get_json_body() or {}
        new = body.get("name") if isinstance(body, dict) else None
        if new is not None and not isinstance(new, str):
            raise PaiHTTPError(400, "name must be a string", code="BadRequest")
        self.send({"id": await self.call(f"clone {job}", self.client.clone(job, name=new or None))}, 201)


class JobConfigHandler(LabHandler):
    """The job's config as submitted (secrets masked by the cluster), ``?format=yaml`` (default) or ``json``;
    ``v1`` converts it to the v1 JSON the Lab form edits (Clone to form), as the widget form does."""

    @web.authenticated
    async def get(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        text = await self.call(f"config of {job}", self.client.config(job))
        fmt = self.get_argument("format", "yaml")
        if fmt not in ("yaml", "json", "v1"):
            raise PaiHTTPError(400, "format must be yaml, json or v1", code="BadRequest")
        if fmt == "v1":
            try:
                v1 = job_to_form_v1(protocol_load.job_from_served_config(text))
                self.send({"format": fmt, "text": json.dumps(v1, indent=2)})
            except JobValidationError as exc:
                raise PaiHTTPError(
                    409, f"this job cannot be written as v1 JSON: {exc.problems[0]}", code="NotConvertible"
                ) from None
            return
        try:
            doc = load_document(text)
        except JobValidationError:
            doc = None
        if fmt == "json":
            body = json.dumps(doc, indent=2) if doc is not None else text
        else:
            body = dump_yaml(doc) if doc is not None else text
        self.send({"format": fmt, "text": body})


class JobLogHandler(LabHandler):
    """A task's log: ``?role=&index=&stream=all|stdout|stderr``; the tail (last 16 KiB, what the page shows)
    unless ``?full=1``, which answers the whole log as a download."""

    @web.authenticated
    async def get(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        stream = self.get_argument("stream", "all")
        if stream not in STREAMS:
            raise PaiHTTPError(400, "stream must be all, stdout or stderr", code="BadRequest")
        role = self.get_argument("role", None) or None
        try:
            index = int(self.get_argument("index", "0"))
        except ValueError:
            raise PaiHTTPError(400, "index must be a number", code="BadRequest") from None
        full = self.get_argument("full", "") == "1"
        text = await self.call(
            f"log of {job}", self.client.logs(job, role=role, index=index, stream=stream, tail=not full)
        )
        if full:
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.set_header("X-Content-Type-Options", "nosniff")
            filename = f"{name}-{role or 'task'}-{index}-{stream}.log".replace('"', "_")
            self.set_header("Content-Disposition", f'attachment; filename="{filename}"')
            self.finish(text)
            return
        self.send({"stream": stream, "role": role, "index": index, "tail": True, "text": text})


def _problems(exc: JobValidationError) -> list[dict[str, str]]:
    return [p.to_dict() for p in exc.problems]


class ValidateHandler(LabHandler):
    """``POST {"text": job YAML/JSON, "submit": bool}``: the problems, each ``{path, message}``; with
    ``submit`` and no problem, the job is submitted and its id answered (201)."""

    @web.authenticated
    async def post(self) -> None:
        body = self.job_body()
        text = body["text"]
        try:
            job = protocol_load.job_from_text(text)
        except JobValidationError as exc:
            self.answer({"valid": False, "problems": placed(_problems(exc))})
            return
        if not body.get("submit"):
            self.answer({"valid": True, "problems": [], "name": job.name})
            return
        try:  # a valid job the cluster refuses ("refused"): a name taken, more than it has, no such cluster
            job_id = await self.client.submit(text, origin={"via": "lab"})
        except InvalidJob as exc:
            problems = exc.problems or [{"path": "", "message": exc.message}]
            self.answer({"valid": False, "refused": True, "problems": placed(problems)})
            return
        except JobConflict as exc:
            problems = [{"path": "jobName", "message": exc.message}]
            self.answer({"valid": True, "refused": True, "problems": placed(problems)})
            return
        except PaiError as exc:
            raise self.failure("submit", exc) from None
        self.answer({"valid": True, "problems": [], "id": job_id}, 201)

    def answer(self, validation: Validation, status: int = 200) -> None:
        self.send(validation, status)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    """The panel's API routes, registered before the extension's catch-all."""
    jobs = pai + "/api/jobs/" + JOB_RE
    return [
        (jobs, JobHandler, args),
        (jobs + "/(?P<action>stop|clone)", JobActionHandler, args),
        (jobs + "/config", JobConfigHandler, args),
        (jobs + "/log", JobLogHandler, args),
        (pai + "/api/validate", ValidateHandler, args),
    ]
