"""The job page's tools beyond the row actions: "set work duration" (max run time), the job's SSH key download
and where each task's remote desktop is.

``PUT pai/api/jobs/{user}~{name}/maxRunTime`` ``{"minutes": N}``; ``GET …/access`` (``{"sshKey": url or null,
"desktops": [{role, index, state, url}], "message"}``); ``GET …/ssh-key`` (the private key as a download, the
job's owner only, as the daemon's own route). On a remote OpenPAI the first and last are 501 NotSupported,
and ``access`` says why there is nothing.
"""

from __future__ import annotations

from typing import Any

from tornado import web

from ..client import NotSupported, PaiError, TaskService
from ..client.ssh import job_key
from ..protocol.rules import run_time_problem
from .answers import Desktop, JobAccess, MaxRunTime
from .common import JOB_RE, PaiHTTPError, job_path, task_prefix
from .lab_base import LabHandler


class MaxRunTimeHandler(LabHandler):
    @web.authenticated
    async def put(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        body = self.get_json_body()
        minutes = body.get("minutes") if isinstance(body, dict) else None
        if problem := run_time_problem(minutes):
            raise PaiHTTPError(400, f"minutes: {problem}", code="BadRequest")
        assert isinstance(minutes, (int, float))  # run_time_problem said so
        result = await self.call(f"max run time of {job}", self.client.set_max_run_time(job, minutes))
        answer: MaxRunTime = {"id": job, "minutes": result.minutes, "deadline": result.deadline}
        self.send(answer)


def desktop(base_url: str, user: str, name: str, service: TaskService) -> Desktop:
    """A task's remote desktop, from the cluster's list of the job's services."""
    url = task_prefix(base_url, user, name, service.role, service.index) + "desktop/"
    return {"role": service.role, "index": service.index, "state": service.state, "url": url}


class AccessHandler(LabHandler):
    """Which of the job's tasks have a desktop, and whether it has an SSH key to download."""

    @web.authenticated
    async def get(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        try:
            services = list(await self.client.services(job))
        except NotSupported as exc:
            none: JobAccess = {"sshKey": None, "desktops": [], "message": exc.message}
            self.send(none)
            return
        except PaiError as exc:
            raise self.failure(f"services of {job}", exc) from None
        base = self.base_url.rstrip("/")
        desktops = [desktop(self.base_url, user, name, s) for s in services if s.name == "desktop"]
        has_ssh = any(s.name == "ssh" for s in services)
        access: JobAccess = {
            "sshKey": f"{base}/pai/api/jobs/{job_path(user, name)}/ssh-key" if has_ssh else None,
            "desktops": desktops,
            "message": None,
        }
        self.send(access)


class SshKeyHandler(LabHandler):
    """The job's private SSH key as a file download (the daemon answers it to the job's owner only)."""

    @web.authenticated
    async def get(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        key = await self.call(f"ssh key of {job}", job_key(self.client, job))
        self.set_header("Content-Type", "application/x-pem-file")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Content-Disposition", f'attachment; filename="{job_path(user, name)}.key"')
        self.finish(key)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    jobs = pai + "/api/jobs/" + JOB_RE
    return [
        (jobs + "/maxRunTime", MaxRunTimeHandler, args),
        (jobs + "/access", AccessHandler, args),
        (jobs + "/ssh-key", SshKeyHandler, args),
    ]
