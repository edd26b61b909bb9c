"""Things done to a running task on request: its services (list, start, stop), a terminal, resource metrics."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...common import safeio
from ..runtime import taskdir
from ..runtime.base import TaskHandle, TaskSpec
from ..task import services
from ..task.env import Placement
from ..task.nvml import Nvml
from .errors import BadRequest, NotFoundError
from .store import JobCore, TaskRow, loads

if TYPE_CHECKING:
    from .service import Cluster

_nvml = Nvml()
CPU_WINDOW = 1.0  # seconds: the kernel's CPU clock ticks every 10 ms, a shorter window reads 0 % or 200 %


class CpuWindows:
    """CPU % of each task over a window of at least ``CPU_WINDOW`` seconds, from samples kept per task: callers
    close together (two widgets, two tabs, a call right after another) all read the same sound figure.

    ``add(key, t, cpu)`` records a sample taken at monotonic time ``t``; ``rate(key)`` is the % over the newest
    window that spans at least CPU_WINDOW, or None when the kept samples span less (``wait_for`` says how long
    to wait for one). Only the newest sample that is a window old and those after it are kept."""

    MAX_TASKS = 4096  # tasks whose samples are kept (the oldest go first)

    def __init__(self, window: float = CPU_WINDOW) -> None:
        self.window = window
        self._samples: dict[tuple[Any, ...], list[tuple[float, float]]] = {}

    def add(self, key: tuple[Any, ...], t: float, cpu: float) -> None:
        if key not in self._samples and len(self._samples) >= self.MAX_TASKS:
            del self._samples[next(iter(self._samples))]
        kept = self._samples.setdefault(key, [])
        if kept and cpu < kept[-1][1]:  # a process left the tree and took its CPU time along: start again
            kept.clear()
        kept.append((t, cpu))
        old = [i for i, (ti, _) in enumerate(kept) if t - ti >= self.window]
        if old:  # the newest sample that is old enough is the next window's base: what is before it can go
            del kept[: old[-1]]

    def wait_for(self, key: tuple[Any, ...], t: float) -> float:
        """Seconds until the oldest kept sample is a window old."""
        kept = self._samples.get(key) or []
        return max(self.window - (t - kept[0][0]), 0.0) if kept else self.window

    def rate(self, key: tuple[Any, ...]) -> float | None:
        kept = self._samples.get(key) or []
        if len(kept) < 2:
            return None
        t, cpu = kept[-1]
        base = next(((ti, ci) for ti, ci in reversed(kept) if t - ti >= self.window), None)
        if base is None:
            return None
        return round(100 * max(cpu - base[1], 0.0) / (t - base[0]), 1)

    def forget(self, keep: set[tuple[Any, ...]], prefix: tuple[Any, ...]) -> None:
        """Drop the samples of this job's tasks (keys starting with ``prefix``) that are not in ``keep``."""
        for key in [k for k in self._samples if k[: len(prefix)] == prefix and k not in keep]:
            del self._samples[key]


_cpu = CpuWindows()


def _task(cluster: Cluster, row: JobCore, role: str, idx: int) -> TaskRow:
    t = cluster.store.task(row["id"], row["attempt"], role, idx)
    if t is None:
        raise NotFoundError(f"job {row['user']}~{row['name']} has no task {role}[{idx}]")
    return t


def _spec(cluster: Cluster, row: JobCore, t: TaskRow) -> TaskSpec:
    """The task's spec as it was started (env, working dir): what a service or a terminal inside it needs."""
    job = cluster.job_model(row)
    placements = {
        (x["role"], x["idx"]): Placement(
            x["host_ip"] or "127.0.0.1", loads(x["ports"], {}) or {}, loads(x["gpus"], []) or []
        )
        for x in cluster.store.tasks(row["id"], row["attempt"])
    }
    return cluster.task_spec(row, job, t, placements)


def _running_handle(t: TaskRow) -> TaskHandle:
    if t["state"] != "RUNNING" or not t["handle"]:
        raise BadRequest(f"task {t['role']}[{t['idx']}] is {t['state']}, not running")
    return TaskHandle.from_dict(loads(t["handle"]))


def service_state(t: TaskRow, name: str, port: int) -> tuple[str, str | None]:
    """The state of one of a task's services (waiting, starting, running, stopping, stopped, unavailable) and,
    when unavailable, the service's own words on why."""
    up = t["state"] == "RUNNING" and services.answers(t["host_ip"] or "127.0.0.1", port)
    if t["task_dir"] and taskdir.has_marker(Path(t["task_dir"]), name):
        return ("stopping" if up else "stopped"), None
    if t["state"] in ("WAITING", "STARTING"):
        return "waiting", None  # for its task to start
    if t["state"] != "RUNNING":
        return "stopped", None
    if up:
        return "running", None
    if t["task_dir"]:  # the service's own words, in its run/: read safely
        said = safeio.read_text_beneath(t["task_dir"], taskdir.service_file(name, "missing"), 4096)
        if said is not None and said.strip():
            return "unavailable", said.strip()
    return "starting", None


def task_services(t: TaskRow) -> list[dict[str, Any]]:
    """A task's services as the job list shows them: ``{name, state}`` (and ``message`` when unavailable)."""
    out = []
    for name, info in (loads(t["services"], {}) or {}).items():
        state, problem = service_state(t, name, info["port"])
        out.append({"name": name, "state": state, **({"message": problem} if problem else {})})
    return out


def list_services(cluster: Cluster, row: JobCore) -> list[dict[str, Any]]:
    out = []
    for t in cluster.store.tasks(row["id"], row["attempt"]):
        for name, info in (loads(t["services"], {}) or {}).items():
            state, problem = service_state(t, name, info["port"])
            out.append(
                {
                    "role": t["role"],
                    "index": t["idx"],
                    "name": name,
                    "host": t["host_ip"] or "127.0.0.1",
                    "port": info["port"],
                    "state": state,
                    "token": info.get("token"),
                    "basePath": info["basePath"],
                    **({"message": problem} if problem else {}),
                }
            )
            if name == "tensorboard":  # where it looks, as the task sees it
                out[-1]["logdir"] = services.tensorboard_logdir(
                    info.get("parameters") or {}, _spec(cluster, row, t).env
                )
    return out


def service_action(cluster: Cluster, row: JobCore, role: str, idx: int, name: str, action: str) -> dict[str, Any]:
    t = _task(cluster, row, role, idx)
    own = loads(t["services"], {}) or {}
    if name not in own:
        raise NotFoundError(f"task {role}[{idx}] has no {name} service")
    if action not in taskdir.SERVICE_ACTIONS:
        raise BadRequest('action must be "start" or "stop"')
    _running_handle(t)
    assert t["task_dir"] is not None  # set when the task was launched (STARTING)
    task_dir = Path(t["task_dir"])
    # in the control part (root's): the supervisor, running as the task's account, reads it through its group
    run_as = cluster.accounts.run_as(row["user"])
    taskdir.write_request(task_dir, name, action, time.time_ns(), run_as[1] if run_as else None)
    taskdir.set_marker(task_dir, name, action == "stop")  # on disk, so a restarted daemon still knows
    return {"role": role, "index": idx, "name": name, "action": action}


def terminal(cluster: Cluster, row: JobCore, role: str, idx: int) -> tuple[list[str], dict[str, str], str | None]:
    t = _task(cluster, row, role, idx)
    handle = _running_handle(t)
    spec = _spec(cluster, row, t)
    return cluster.runtime.terminal_command(handle, spec.env, spec.work_dir)


async def metrics(cluster: Cluster, row: JobCore, cpu: CpuWindows | None = None) -> dict[str, Any]:
    """CPU %, memory and (with NVML) GPU use of each task. CPU % is over at least CPU_WINDOW seconds of kept
    samples whoever asked before: a call that finds no sample old enough waits for one (once, for all tasks)."""
    cpu = cpu or _cpu
    tasks = cluster.store.tasks(row["id"], row["attempt"])
    local = cluster.runtime.local_gpus
    gpu_ok = local and await asyncio.to_thread(lambda: _nvml.available)
    gpu_message = _nvml.message if local else f"GPU use is not sampled on the {cluster.runtime.name} runtime's nodes"
    out = []
    running: dict[tuple[Any, ...], tuple[dict[str, Any], TaskHandle]] = {}
    for t in tasks:
        entry: dict[str, Any] = {
            "role": t["role"],
            "index": t["idx"],
            "state": "WAITING" if t["state"] == "STARTING" else t["state"],
            "cpuPercent": None,
            "memoryBytes": None,
            "memoryLimitBytes": t["memory_mb"] << 20,
            "gpus": [],
        }
        out.append(entry)
        if t["state"] == "RUNNING" and t["handle"]:
            handle = TaskHandle.from_dict(loads(t["handle"]))
            running[(row["id"], t["attempt"], t["role"], t["idx"], t["task_attempt"])] = (entry, handle)
            if gpu_ok:
                samples = await asyncio.to_thread(_nvml.sample, loads(t["gpus"], []) or [])
                entry["gpus"] = [
                    {
                        "index": g.index,
                        "utilizationPercent": g.utilization_percent,
                        "memoryUsedBytes": g.memory_used_bytes,
                        "memoryTotalBytes": g.memory_total_bytes,
                    }
                    for g in samples.values()
                ]
    cpu.forget(set(running), (row["id"],))
    todo = dict(running)
    for _ in range(2):  # a sample now; then, where no kept sample is old enough, one more after waiting for it
        wait = 0.0
        for key, (entry, handle) in list(todo.items()):
            sample = await asyncio.to_thread(cluster.runtime.sample, handle)
            if sample is None:
                del todo[key]
                continue
            now = time.monotonic()
            cpu.add(key, now, sample.cpu_seconds)
            entry["memoryBytes"] = sample.memory_bytes
            entry["cpuPercent"] = cpu.rate(key)
            if entry["cpuPercent"] is None:
                wait = max(wait, cpu.wait_for(key, now))
            else:
                del todo[key]
        if not todo:
            break
        await asyncio.sleep(wait + 0.01)
    return {"time": int(time.time() * 1000), "gpu": {"available": gpu_ok, "message": gpu_message}, "tasks": out}
