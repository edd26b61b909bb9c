"""Things done to a running task on request: its services (list, start, stop), a terminal, resource metrics."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from ..metrics.nvml import Nvml
from . import services
from .env import Placement
from .errors import BadRequest, NotFoundError
from .runtime.base import TaskHandle, TaskSpec
from .store import loads
from .taskspec import task_spec

_nvml = Nvml()
_last: dict[tuple[Any, ...], tuple[float, float]] = {}  # task key -> (monotonic time, cpu seconds)


def _task(cluster: Any, row: dict[str, Any], role: str, idx: int) -> dict[str, Any]:
    t = cluster.store.task(row["id"], row["attempt"], role, idx)
    if t is None:
        raise NotFoundError(f"job {row['user']}~{row['name']} has no task {role}[{idx}]")
    return t


def _spec(cluster: Any, row: dict[str, Any], t: dict[str, Any]) -> TaskSpec:
    """The task's spec as it was started (env, working dir): what a service or a terminal inside it needs."""
    job = cluster.job_model(row)
    placements = {(x["role"], x["idx"]): Placement(x["host_ip"] or "127.0.0.1", loads(x["ports"], {}) or {},
                                                   loads(x["gpus"], []) or [])
                  for x in cluster.store.tasks(row["id"], row["attempt"])}
    return task_spec(row, job, t, placements, docker=cluster.runtime.name == "docker",
                     home=cluster.user_home(row["user"]), layout=cluster.layout(row, job),
                     host_paths=cluster.owns_cluster(row["user"]))


def _running_handle(t: dict[str, Any]) -> TaskHandle:
    if t["state"] != "RUNNING" or not t["handle"]:
        raise BadRequest(f"task {t['role']}[{t['idx']}] is {t['state']}, not running")
    return TaskHandle.from_dict(loads(t["handle"]))


def list_services(cluster: Any, row: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for t in cluster.store.tasks(row["id"], row["attempt"]):
        for name, info in (loads(t["services"], {}) or {}).items():
            host = t["host_ip"] or "127.0.0.1"
            up = t["state"] == "RUNNING" and services.answers(host, info["port"])
            if t["task_dir"] and (Path(t["task_dir"]) / f"service-{name}.stopped").exists():
                state = "stopping" if up else "stopped"
            elif t["state"] in ("WAITING", "STARTING"):
                state = "waiting"  # for its task to start
            elif t["state"] != "RUNNING":
                state = "stopped"
            else:
                state = "running" if up else "starting"
            missing = Path(t["task_dir"]) / f"service-{name}.missing" if t["task_dir"] else None  # e.g. no sshd
            problem = missing.read_text().strip() if state == "starting" and missing and missing.exists() else None
            out.append({"role": t["role"], "index": t["idx"], "name": name, "host": host, "port": info["port"],
                        "state": "unavailable" if problem else state, "token": info.get("token"),
                        "basePath": info["basePath"], **({"message": problem} if problem else {})})
    return out


def service_action(cluster: Any, row: dict[str, Any], role: str, idx: int, name: str, action: str) -> dict[str, Any]:
    t = _task(cluster, row, role, idx)
    own = loads(t["services"], {}) or {}
    if name not in own:
        raise NotFoundError(f"task {role}[{idx}] has no {name} service")
    if action not in ("start", "stop"):
        raise BadRequest('action must be "start" or "stop"')
    _running_handle(t)
    task_dir = Path(t["task_dir"])
    (task_dir / f"service-{name}.request").write_text(action)  # the task's supervisor acts on it
    marker = task_dir / f"service-{name}.stopped"  # on disk, so a restarted daemon still knows
    if action == "stop":
        marker.touch()
    else:
        marker.unlink(missing_ok=True)
    return {"role": role, "index": idx, "name": name, "action": action}


def terminal(cluster: Any, row: dict[str, Any], role: str, idx: int) -> tuple[list[str], dict[str, str], str | None]:
    t = _task(cluster, row, role, idx)
    handle = _running_handle(t)
    spec = _spec(cluster, row, t)
    return cluster.runtime.terminal_command(handle, spec.env, spec.work_dir)


async def metrics(cluster: Any, row: dict[str, Any]) -> dict[str, Any]:
    """CPU %, memory and (with NVML) GPU use of each task; CPU % is over the time since the last call."""
    tasks = cluster.store.tasks(row["id"], row["attempt"])
    gpu_ok = await asyncio.to_thread(lambda: _nvml.available)
    out = []
    for t in tasks:
        entry: dict[str, Any] = {"role": t["role"], "index": t["idx"],
                                 "state": "WAITING" if t["state"] == "STARTING" else t["state"],
                                 "cpuPercent": None, "memoryBytes": None, "memoryLimitBytes": t["memory_mb"] << 20,
                                 "gpus": []}
        if t["state"] == "RUNNING" and t["handle"]:
            handle = TaskHandle.from_dict(loads(t["handle"]))
            key = (row["id"], t["attempt"], t["role"], t["idx"], t["task_attempt"])
            first = await asyncio.to_thread(cluster.runtime.sample, handle)
            if key not in _last and first is not None:  # no earlier sample: measure over a short interval
                _last[key] = (time.monotonic(), first.cpu_seconds)
                await asyncio.sleep(0.2)
                first = await asyncio.to_thread(cluster.runtime.sample, handle)
            if first is not None:
                now = time.monotonic()
                then, cpu = _last.get(key, (now, first.cpu_seconds))
                used = max(first.cpu_seconds - cpu, 0.0)  # a process that left the tree takes its CPU time along
                entry["cpuPercent"] = round(100 * used / (now - then), 1) if now > then else 0.0
                entry["memoryBytes"] = first.memory_bytes
                _last[key] = (now, first.cpu_seconds)
            if gpu_ok:
                samples = await asyncio.to_thread(_nvml.sample, loads(t["gpus"], []) or [])
                entry["gpus"] = [{"index": g.index, "utilizationPercent": g.utilization_percent,
                                  "memoryUsedBytes": g.memory_used_bytes, "memoryTotalBytes": g.memory_total_bytes}
                                 for g in samples.values()]
        out.append(entry)
    return {"time": int(time.time() * 1000), "gpu": {"available": gpu_ok, "message": _nvml.message}, "tasks": out}
