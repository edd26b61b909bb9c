"""``GET pai/api/capacity``: the sidebar's cluster capacity view — CPUs, GPUs and memory in use per virtual
cluster against its quota (the cluster's ``/api/v2/virtual-clusters``, which the embedded daemon and OpenPAI both
answer), and the profile user's waiting jobs with the reason the scheduler gives for each (their job details).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tornado import web

from ..client import PaiError
from ..client.wire import Op, Req, json_object
from .answers import Capacity, Resources, VirtualClusterUse, WaitingJob
from .lab_base import LabHandler

MAX_WAITING = 20  # reasons asked for (one detail each); the count covers them all


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
        rows: list[WaitingJob] = []
        for i, job in enumerate(waiting[:MAX_WAITING]):
            d = details[i]
            reason = None if isinstance(d, BaseException) else d.job_status.waiting_reason
            rows.append({"id": job.id, "name": job.name, "virtualCluster": job.virtual_cluster, "reason": reason})
        answer: Capacity = {"virtualClusters": vc_rows(info), "waiting": rows, "waitingCount": len(waiting)}
        self.send(answer)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [(pai + "/api/capacity", CapacityHandler, args)]
