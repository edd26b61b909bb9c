"""``GET pai/api/capacity``: the sidebar's cluster capacity view — CPUs, GPUs and memory in use per virtual
cluster against its quota (the cluster's ``/api/v2/virtual-clusters``, which the embedded daemon and OpenPAI both
answer), the profile user's waiting jobs with the reason the scheduler gives for each (their job details), and
what each user ran in each virtual cluster over the last week (the embedded cluster's ``/api/v2/local/usage``: the
user's own rows, an admin's everyone's, and every virtual cluster's totals; docs/queue.md, "Usage").
"""

from __future__ import annotations

import asyncio
from typing import Any

from tornado import web

from ..client import PaiError
from ..client.models import Usage, UsageFigures
from ..client.wire import Op, Req, json_object
from .answers import Capacity, Resources, UsageLine, UsageSummary, VirtualClusterUse, WaitingJob
from .lab_base import LabHandler

MAX_WAITING = 20  # reasons asked for (one detail each); the count covers them all
USAGE_WINDOW_HOURS = 24 * 7


def _virtual_clusters() -> Op[dict[str, Any]]:
    resp = yield Req("GET", "/api/v2/virtual-clusters")
    return json_object(resp)


def _resources(raw: Any) -> Resources:
    raw = raw if isinstance(raw, dict) else {}

    def num(*keys: str) -> float:
        for k in keys:
            if isinstance(raw.get(k), (int, float)):
                return float(raw[k])
        return 0.0

    return {"cpu": num("cpu", "vCores"), "memoryMB": num("memory"), "gpu": num("gpu", "GPUs")}


def vc_rows(info: dict[str, Any]) -> list[VirtualClusterUse]:
    """Each virtual cluster's use and quota (cpu, memoryMB, gpu), sorted by name."""
    return [
        {
            "name": name,
            "used": _resources(vc.get("resourcesUsed")),
            "total": _resources(vc.get("resourcesTotal")),
        }
        for name, vc in sorted(info.items())
        if isinstance(vc, dict)
    ]


def usage_json(usage: Usage) -> UsageSummary:
    """The daemon's usage as the capacity view reads it: the caller's rows, then each virtual cluster's total."""

    def line(f: UsageFigures) -> UsageLine:
        return {
            "username": f.username,
            "users": f.users if f.users is not None else 1,
            "virtualCluster": f.virtual_cluster,
            "gpuHoursAllocated": f.gpu_hours_allocated,
            "gpuHoursUsed": f.gpu_hours_used,
            "gpuHoursIdle": f.gpu_hours_idle,
            "cpuHours": f.cpu_hours,
            "jobsStarted": f.jobs_started,
            "waitMeanSeconds": f.wait_mean_s,
        }

    message = usage.gpu_use.get("message")
    return {
        "windowHours": usage.window_hours,
        "gpuUseMessage": None if usage.gpu_use.get("sampled") or not isinstance(message, str) else message,
        "rows": [line(r) for r in usage.rows] + [line(t) for t in usage.virtual_clusters],
    }


class CapacityHandler(LabHandler):
    @web.authenticated
    async def get(self) -> None:
        client = self.client
        try:
            info = await client._drive(_virtual_clusters())
            waiting = list(await client.list_jobs(limit=200, state=["WAITING"]))
            details = await asyncio.gather(
                *(client.detail(j.id) for j in waiting[:MAX_WAITING]), return_exceptions=True
            )
        except PaiError as exc:
            raise self.failure("capacity", exc) from None
        try:
            usage: UsageSummary | None = usage_json(await client.usage(window_hours=USAGE_WINDOW_HOURS))
        except PaiError:  # an OpenPAI server (NotSupported), or a daemon from before usage: the rest still shows
            usage = None
        rows: list[WaitingJob] = []
        for i, job in enumerate(waiting[:MAX_WAITING]):
            d = details[i]
            reason = None if isinstance(d, BaseException) else d.job_status.waiting_reason
            rows.append({"id": job.id, "name": job.name, "virtualCluster": job.virtual_cluster, "reason": reason})
        answer: Capacity = {
            "virtualClusters": vc_rows(info),
            "waiting": rows,
            "waitingCount": len(waiting),
            "usage": usage,
        }
        self.send(answer)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [(pai + "/api/capacity", CapacityHandler, args)]
