"""``GET /api/v2/local/jobs``: OpenPAI's job list (the filters, order, paging and shape of ``GET /api/v2/jobs``)
with, on each live job, ``tasks``: its current attempt's tasks as the detail gives them (``role`` added), each
with ``services: [{name, state}]``. What the Lab's sidebar shows, in one request instead of a detail and a
services request per live job."""

from __future__ import annotations

import json
from typing import Any

from ...common.states import FINAL
from ..core import taskops
from . import views
from .base import Base, Route
from .jobs import list_filters


class JobsWithTasks(Base):
    def get(self) -> None:
        with_total = self.get_argument("withTotalCount", "false").lower() == "true"
        text, total = self.cluster.store.list_json(**list_filters(self), with_total=with_total)
        items: list[dict[str, Any]] = json.loads(text)
        store = self.cluster.store
        cores = store.job_cores([(i["username"], i["name"]) for i in items if i["state"] not in FINAL])
        tasks = store.current_tasks([c["id"] for c in cores])
        listed = {
            (c["user"], c["name"]): [
                {"role": t["role"], **views.task_status(c, t), "services": taskops.task_services(t)}
                for t in tasks[c["id"]]
            ]
            for c in cores
        }
        for item in items:
            if (item["username"], item["name"]) in listed:
                item["tasks"] = listed[item["username"], item["name"]]
        self.write_json({"totalCount": total, "data": items} if with_total else items)


def routes(args: dict[str, Any]) -> list[Route]:
    return [(r"/api/v2/local/jobs", JobsWithTasks, args)]
