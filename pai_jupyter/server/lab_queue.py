"""The Lab's queue view and job notifications, through the profile's client (the daemon decides who may do what).

- ``GET pai/api/queue``: each virtual cluster's waiting jobs in order (an admin sees all, a user their own), with
  their place, priority class and why they wait, and ``canReorder``.
- ``PUT pai/api/jobs/{user}~{name}/priority`` ``{"jobPriority": "prod", "position": 0}``: change a waiting job's
  class or place (the daemon answers 403 to anyone but an admin).
- ``GET pai/api/jobs/{user}~{name}/notification``: which state changes the job asked to hear of
  (``extras.jobStatusChangeNotification``, OpenPAI's keys), read once per job from its config: the Lab asks only
  for a job of its own whose state it saw change in the job list it already polls.
"""

from __future__ import annotations

from typing import Any, cast

from tornado import web

from ..client.models import QueuedJob as ClusterQueued
from ..client.models import WaitingQueue as ClusterQueue
from ..protocol import Job
from ..protocol.rules import NOTIFY_KEY, NOTIFY_STATES
from .answers import JobNotification, QueuedJob, WaitingQueue, fields_named
from .common import JOB_RE, PaiHTTPError
from .lab_base import LabHandler

CLASSES = ("default", "crit", "prod", "test", "oppo")
QUEUED = fields_named(ClusterQueued, QueuedJob.__required_keys__)  # what the queue view reads of each entry


def queue_json(answer: ClusterQueue) -> WaitingQueue:
    """The cluster's waiting lines as the queue view reads them: each entry the client's model under its wire
    names, the fields ``QueuedJob`` has (a field added to both reaches the Lab with no more code here)."""
    lines = {
        vc: [cast(QueuedJob, j.model_dump(mode="json", by_alias=True, include=QUEUED)) for j in line]
        for vc, line in answer.virtual_clusters.items()
    }
    return {"virtualClusters": lines, "canReorder": answer.can_reorder}


class QueueHandler(LabHandler):
    @web.authenticated
    async def get(self) -> None:
        answer = await self.call("the waiting queue", self.client.waiting_queue())
        self.send(queue_json(answer))


class PriorityHandler(LabHandler):
    @web.authenticated
    async def put(self, user: str, name: str) -> None:
        body = self.get_json_body()
        if not isinstance(body, dict):
            raise PaiHTTPError(400, "the body must be a JSON object", code="BadRequest")
        priority, position = body.get("jobPriority"), body.get("position")
        if priority is not None and priority not in CLASSES:
            raise PaiHTTPError(400, f"jobPriority must be one of {', '.join(CLASSES)}", code="BadRequest")
        if position is not None and (not isinstance(position, int) or isinstance(position, bool) or position < 0):
            raise PaiHTTPError(400, "position must be an integer from 0", code="BadRequest")
        job = f"{user}~{name}"  # anyone's: only an admin may, and the daemon checks it
        result = await self.call(f"priority of {job}", self.client.set_priority(job, priority, position=position))
        self.send({"id": job, "jobPriority": result.job_priority, "ahead": result.ahead})


class NotificationHandler(LabHandler):
    @web.authenticated
    async def get(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)  # the user's own jobs only
        text = await self.call(f"config of {job}", self.client.config(job))
        try:
            wanted = Job.from_text(text).extras.get(NOTIFY_KEY)
        except Exception:  # (a config this version cannot read: nothing asked for)
            wanted = None
        states = [s for s, key in NOTIFY_STATES.items() if wanted.get(key) is True] if isinstance(wanted, dict) else []
        answer: JobNotification = {"id": job, "states": states}
        self.send(answer)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    jobs = pai + "/api/jobs/" + JOB_RE
    return [
        (pai + "/api/queue", QueueHandler, args),
        (jobs + "/priority", PriorityHandler, args),
        (jobs + "/notification", NotificationHandler, args),
    ]
