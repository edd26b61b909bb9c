"""``GET {base_url}pai/api/jobs``: the profile's jobs with, per task, the URLs of its services and terminal.

What the labextension draws its job panel from. URLs are paths on this Jupyter server (the browser never
learns a task's host or port). Jobs that have ended carry no service URLs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from ..client import FINAL_STATES, BadRequest, JobNotFound, NotSupported, PaiError
from ..common.services import links
from .common import PaiHTTPError, SafeErrors, job_path, safe_json, task_prefix
from .registry import Registry


def _summary(job: Any) -> dict[str, Any]:
    return {
        "id": job.id,
        "name": job.name,
        "username": job.username,
        "state": job.state,
        "submissionTime": job.submission_time.isoformat() if job.submission_time else None,
        "totalTaskNumber": job.total_task_number,
        "totalGpuNumber": job.total_gpu_number,
        "launchedTime": job.launched_time.isoformat() if job.launched_time else None,
        "completedTime": job.completed_time.isoformat() if job.completed_time else None,
        "retries": job.retries,
        "virtualCluster": job.virtual_cluster,
        "appExitCode": job.app_exit_code,
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
            jobs = await client.list_jobs(limit=limit, state=state.split(",") if state else None)
        except BadRequest:
            raise PaiHTTPError(
                400, "state must be job states separated by commas, e.g. RUNNING,WAITING", code="BadRequest"
            ) from None
        except PaiError as exc:
            self.log.warning("pai: listing jobs: %s", exc)
            raise PaiHTTPError(
                502, "the cluster did not answer; see the Jupyter server's log", code="ClusterError"
            ) from None
        live = [j for j in jobs if j.state not in FINAL_STATES]
        extra = await asyncio.gather(*(self._tasks(j.username, j.name) for j in live))
        by_id = {j.id: e for j, e in zip(live, extra, strict=True)}
        base = self.base_url.rstrip("/")
        out = []
        for job in jobs:
            row = _summary(job)
            row["metricsUrl"] = f"{base}/pai/api/jobs/{job_path(job.username, job.name)}/metrics"
            row.update(by_id.get(job.id, {"tasks": [], "servicesMessage": None}))
            out.append(row)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(safe_json({"profile": client.profile.name, "user": client.username, "jobs": out}))

    async def _tasks(self, user: str, name: str) -> dict[str, Any]:
        """Each task of a live job with its service URLs (and states) and its terminal URL."""
        client = self.registry.client
        job = f"{user}~{name}"
        message = None
        try:
            detail, services = await asyncio.gather(client.detail(job), self._services(job))
        except JobNotFound:  # deleted since the list was read
            return {"tasks": [], "servicesMessage": None}
        except PaiError as exc:
            self.log.warning("pai: tasks of %s: %s", job, exc)
            return {"tasks": [], "servicesMessage": "the cluster did not answer for this job"}
        if isinstance(services, str):
            services, message = [], services
        tasks = []
        for t in detail.tasks:
            prefix = task_prefix(self.base_url, user, name, t.role, t.task_index)
            own = [s for s in services if s.get("role") == t.role and int(s.get("index", -1)) == t.task_index]
            tasks.append(
                {
                    "role": t.role,
                    "index": t.task_index,
                    "state": t.task_state,
                    "services": [  # {name, title, url (None: no web page), state}
                        {**link, "state": next(s.get("state") for s in own if s.get("name") == link["name"])}
                        for link in links(self.base_url, user, name, t.role, t.task_index, [s["name"] for s in own])
                    ],
                    # a remote OpenPAI's task: web SSH to its sshd (see webssh.py), which needs an ssh port
                    "terminalUrl": f"{prefix}terminal/websocket"
                    if t.task_state == "RUNNING" and (not message or (t.container_ports or {}).get("ssh"))
                    else None,
                    "terminalPage": f"{prefix}terminal/"
                    if t.task_state == "RUNNING" and (not message or (t.container_ports or {}).get("ssh"))
                    else None,
                }
            )
        return {"tasks": tasks, "servicesMessage": message}

    async def _services(self, job: str) -> list[dict[str, Any]] | str:
        try:
            return list(await self.registry.client.services(job))
        except NotSupported as exc:
            return exc.message
