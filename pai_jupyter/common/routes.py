"""The route of a task's service under a Jupyter server (``{base}pai/jobs/{user}~{job}/{role}/{index}/{service}/``)
and which tasks run a service plugin: the daemon gives the in-task Jupyter this route as its base path, the
server extension serves it, and the notebook links to it, so all three build it here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

JOBS = "pai/jobs"


def job_segment(user: str, job: str) -> str:
    """``user~job``, each quoted for a URL path segment."""
    return f"{quote(user, safe='')}~{quote(job, safe='')}"


def task_route(base: str, user: str, job: str, role: str, index: int) -> str:
    """``{base}pai/jobs/{user}~{job}/{role}/{index}/`` (``base`` with or without its trailing slash)."""
    return f"{base.rstrip('/')}/{JOBS}/{job_segment(user, job)}/{quote(role, safe='')}/{int(index)}/"


def service_route(base: str, user: str, job: str, role: str, index: int, service: str) -> str:
    """``{base}pai/jobs/{user}~{job}/{role}/{index}/{service}/``."""
    return f"{task_route(base, user, job, role, index)}{quote(service, safe='')}/"


def service_tasks(params: Mapping[str, Any] | None, roles: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """(role, index) of each task that runs a service plugin (tensorboard, jupyter, desktop) with these
    ``parameters``, given the job's roles as (name, instances): the role ``taskRole`` names (else the first role),
    its task 0, or every task of it with ``allTasks: true``. OpenPAI's rule, for the daemon and the notebook."""
    if not roles:
        return []
    params = params or {}
    names = [name for name, _ in roles]
    name, instances = roles[names.index(params["taskRole"])] if params.get("taskRole") in names else roles[0]
    return [(name, i) for i in range(instances)] if params.get("allTasks") is True else [(name, 0)]
