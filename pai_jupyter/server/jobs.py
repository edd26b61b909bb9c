"""``GET {base_url}pai/api/jobs``: the profile's jobs with, per task, the URLs of its services and terminal.

What the labextension draws its job panel from. URLs are paths on this Jupyter server (the browser never
learns a task's host or port). Jobs that have ended carry no service URLs.

On the embedded cluster (and the Slurm backend, the same daemon) one request gives the list with each live
job's tasks and their services (``jobs_with_tasks``); a remote OpenPAI server has no such route, so there it
takes the list and then, per live job, its detail and services. Both end in the same models, shaped once
(``job_row``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TypeAlias, cast

from jupyter_server.base.handlers import APIHandler
from tornado import web

from ..client import FINAL_STATES, AsyncClient, BadRequest, JobNotFound, JobSummary, NotSupported, PaiError
from ..client.base import LOCAL_DOWN
from ..client.models import ListedTask, TaskService
from ..common.services import links
from .answers import JobFields, JobList, JobRow, TaskRow, fields_named
from .common import PaiHTTPError, SafeErrors, job_path, safe_json, task_prefix, unavailable
from .registry import Registry

Listed: TypeAlias = tuple[JobSummary, Sequence[ListedTask], str | None]
"""A job, its tasks with their services (none when it has ended), and why its services are not known."""
PREEMPTED_EXIT = -1003
"""A preempted attempt's exit code (cluster/core/state.py PREEMPTED, OpenPAI's PodPreemptedForCriticalPod)."""
SWEEP_TAG = "sweep:"  # the tag the daemon gives a sweep's trials (cluster/http/sweeps.py): sweep:NAME


async def listed_jobs(client: AsyncClient, limit: int, state: list[str] | None, log: logging.Logger) -> list[Listed]:
    """The jobs with their tasks: in one request where the cluster can, else a detail and services per live job."""
    try:
        return await listed_in_one_call(client, limit, state)
    except NotSupported:
        return await listed_per_job(client, limit, state, log)


async def listed_in_one_call(client: AsyncClient, limit: int, state: list[str] | None) -> list[Listed]:
    """The embedded cluster's list with tasks (NotSupported elsewhere)."""
    return [(job, job.tasks or [], None) for job in await client.jobs_with_tasks(limit=limit, state=state)]


async def listed_per_job(client: AsyncClient, limit: int, state: list[str] | None, log: logging.Logger) -> list[Listed]:
    """Any server: the list, then each live job's detail and services (1 + 2N requests)."""
    jobs = await client.list_jobs(limit=limit, state=state)
    live = [j for j in jobs if j.state not in FINAL_STATES]
    extra = dict(zip((j.id for j in live), await asyncio.gather(*(_tasks(client, j, log) for j in live)), strict=True))
    return [(job, *extra.get(job.id, ([], None))) for job in jobs]


async def _tasks(client: AsyncClient, job: JobSummary, log: logging.Logger) -> tuple[list[ListedTask], str | None]:
    """A live job's tasks with their services, from its detail and services (a remote OpenPAI server)."""
    try:
        detail, services = await asyncio.gather(client.detail(job.id), _services(client, job.id))
    except JobNotFound:  # deleted since the list was read
        return [], None
    except PaiError as exc:
        log.warning("pai: tasks of %s: %s", job.id, exc)
        return [], "the cluster did not answer for this job"
    message = services if isinstance(services, str) else None
    services = [] if isinstance(services, str) else services
    tasks = [
        ListedTask.model_validate(
            {
                **t.model_dump(by_alias=True),
                "services": [
                    s.model_dump(by_alias=True) for s in services if (s.role, s.index) == (t.role, t.task_index)
                ],
            }
        )
        for t in detail.tasks
    ]
    return tasks, message


async def _services(client: AsyncClient, job: str) -> list[TaskService] | str:
    try:
        return list(await client.services(job))
    except NotSupported as exc:
        return exc.message


JOB_FIELDS = fields_named(JobSummary, JobFields.__required_keys__ - {"id", "metricsUrl"})
"""The JobSummary fields ``JobFields`` has (``id`` and ``metricsUrl`` are made here)."""


def job_fields(base_url: str, job: JobSummary) -> JobFields:
    """What the job list's row and the job page say of a job (``JobFields``), read off the client's model under
    its wire names: a field added to JobSummary and to JobFields reaches both answers with no more code here."""
    shared = job.model_dump(mode="json", by_alias=True, include=JOB_FIELDS)
    metrics = f"{base_url.rstrip('/')}/pai/api/jobs/{job_path(job.username, job.name)}/metrics"
    return cast(JobFields, {**shared, "id": job.id, "metricsUrl": metrics})


def job_row(base_url: str, job: JobSummary, tasks: Sequence[ListedTask], message: str | None) -> JobRow:
    """One job of the Lab's list (``JobRow`` in labextension/src/api.ts): each task with the URLs of its services
    (``{name, title, url (None: no web page), state}``) and terminal."""
    user, name = job.username, job.name
    return {
        **job_fields(base_url, job),
        "appExitCode": job.app_exit_code,
        # being preempted now, its tasks in their grace (the next attempt's item still has the old exit code)
        "preempting": job.state == "RUNNING"
        and job.sub_state == "AttemptDeletionPending"
        and job.app_exit_code == PREEMPTED_EXIT,
        "tasks": [_task_row(base_url, user, name, t, message) for t in tasks],
        "servicesMessage": message,
        "sweep": next((t.removeprefix(SWEEP_TAG) for t in job.tags or () if t.startswith(SWEEP_TAG)), None),
    }


def _task_row(base_url: str, user: str, name: str, t: ListedTask, message: str | None) -> TaskRow:
    prefix = task_prefix(base_url, user, name, t.role, t.task_index)
    state = {s.name: s.state for s in t.services}
    # a remote OpenPAI's task: web SSH to its sshd (see webssh.py), which needs an ssh port
    terminal = t.task_state == "RUNNING" and (not message or bool((t.container_ports or {}).get("ssh")))
    return {
        "role": t.role,
        "index": t.task_index,
        "state": t.task_state,
        "services": [
            {**link, "state": state[link["name"]]}
            for link in links(base_url, user, name, t.role, t.task_index, list(state))
        ],
        "terminalUrl": f"{prefix}terminal/websocket" if terminal else None,
        "terminalPage": f"{prefix}terminal/" if terminal else None,
    }


class JobsHandler(SafeErrors, APIHandler):
    """The jobs of this server's profile user, newest first (``?limit=N``, ``?state=RUNNING,WAITING``)."""

    def initialize(self, registry: Registry) -> None:
        self.registry = registry

    @web.authenticated
    async def get(self) -> None:
        client = self.registry.client
        most = self.registry.config.jobs_list_limit
        try:
            limit = max(1, min(int(self.get_argument("limit", "0") or 0) or most, most))
        except ValueError:
            limit = most
        state = self.get_argument("state", None)
        try:
            listed = await listed_jobs(client, limit, state.split(",") if state else None, self.log)
        except BadRequest:
            raise PaiHTTPError(
                400, "state must be job states separated by commas, e.g. RUNNING,WAITING", code="BadRequest"
            ) from None
        except PaiError as exc:
            self.log.warning("pai: listing jobs: %s", exc)
            if exc.code == LOCAL_DOWN:  # how to start it again: the sidebar's status says it
                raise unavailable(exc) from None
            raise PaiHTTPError(
                502, "the cluster did not answer; see the Jupyter server's log", code="ClusterError"
            ) from None
        answer: JobList = {
            "profile": client.profile.name,
            "user": client.username,
            "jobs": [job_row(self.base_url, *row) for row in listed],
        }
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(safe_json(answer))
