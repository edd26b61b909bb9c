"""The PAI_* environment of a task (the user guide's table, OpenPAI's runtime names, v1 names)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from ...protocol import Job, TaskRole
from ..runtime.view import TaskView


@dataclass
class Placement:
    """Where one task of the attempt runs: its host, ports by label, and GPU indices."""

    host_ip: str
    ports: dict[str, list[int]]
    gpus: list[int]


def _first_port(p: Placement) -> int | None:
    if p.ports.get("http"):
        return p.ports["http"][0]
    return next((v[0] for v in p.ports.values() if v), None)


def _value(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def task_env(
    job: Job,
    user: str,
    vc: str,
    role: TaskRole,
    index: int,
    placements: dict[tuple[str, int], Placement],
    *,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """Every variable a task sees, right for multi-role, multi-task jobs: the job's parameters, what describes the
    job, each role and where its tasks are, then this task, then ``extra``."""
    env: dict[str, str] = {k: _value(v) for k, v in job.parameters.items() if k.isidentifier()}
    env |= _job_env(job, user, vc) | _roles_env(job, placements) | _current_env(job, role, index, placements)
    env.update(extra or {})
    return env


def _completion(r: TaskRole) -> tuple[int, int]:
    """A role's min failed (-1: never) and min succeeded tasks (all its instances unless it says)."""
    return (-1 if r.min_failed is None else r.min_failed, r.instances if r.min_succeeded is None else r.min_succeeded)


def _job_env(job: Job, user: str, vc: str) -> dict[str, str]:
    roles = [r.name for r in job.task_roles]
    total = job.total_tasks
    return {
        "PAI_JOB_NAME": job.name,
        "PAI_FRAMEWORK_NAME": f"{user}~{job.name}",
        "PAI_USER_NAME": user,
        "PAI_USERNAME": user,
        "PAI_DEFAULT_FS_URI": "",
        "PAI_VIRTUAL_CLUSTER": vc,
        "PAI_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLE_LIST": ",".join(roles),
        "PAI_JOB_TASK_ROLE_COUNT": str(len(roles)),
        "PAI_TASK_ROLES_NUM": str(len(roles)),
        "PAI_JOB_TASK_ROLE_LIST": ",".join(roles),
        "PAI_JOB_TASK_COUNT": str(total),
        "PAI_TASKS_NUM": str(total),
    }


def _roles_env(job: Job, placements: dict[tuple[str, int], Placement]) -> dict[str, str]:
    """Each role's counts and resources, and where each of its tasks is (its IP and ports)."""
    env: dict[str, str] = {}
    instances = []
    for r in job.task_roles:
        min_failed, min_succeeded = _completion(r)
        env[f"PAI_TASK_ROLE_TASK_COUNT_{r.name}"] = str(r.instances)
        env[f"PAI_RESOURCE_{r.name}"] = f"{r.gpu},{r.cpu},{r.memory_mb},{r.shm_mb}"
        env[f"PAI_MIN_FAILED_TASK_COUNT_{r.name}"] = str(min_failed)
        env[f"PAI_MIN_SUCCEEDED_TASK_COUNT_{r.name}"] = str(min_succeeded)
        hosts = []
        for i in range(r.instances):
            instances.append(f"{r.name}:{i}")
            p = placements.get((r.name, i))
            if p is None:
                continue
            env[f"PAI_HOST_IP_{r.name}_{i}"] = p.host_ip
            for label, ports in p.ports.items():
                env[f"PAI_PORT_LIST_{r.name}_{i}_{label}"] = ",".join(map(str, ports))
                env[f"PAI_{r.name}_{i}_{label}_PORT"] = ",".join(map(str, ports))
            port = _first_port(p)
            hosts.append(f"{p.host_ip}:{port}" if port else p.host_ip)
        env[f"PAI_TASK_ROLE_{r.name}_HOST_LIST"] = ",".join(hosts)
    env["PAI_TASK_ROLE_INSTANCES"] = ",".join(instances)
    return env


def _current_env(job: Job, role: TaskRole, index: int, placements: dict[tuple[str, int], Placement]) -> dict[str, str]:
    """This task: its role and index, its address, ports and GPUs, its resources and the job's directories."""
    me = placements[(role.name, index)]
    port = _first_port(me)
    min_failed, min_succeeded = _completion(role)
    env = {
        "PAI_CURRENT_TASK_ROLE_NAME": role.name,
        "PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX": str(index),
        "PAI_TASK_INDEX": str(index),
        "PAI_TASK_ROLE_NAME": role.name,
        "PAI_TASK_ROLE_INDEX": str([r.name for r in job.task_roles].index(role.name)),
        "PAI_CURRENT_CONTAINER_IP": me.host_ip,
        "PAI_CONTAINER_HOST_IP": me.host_ip,
        "PAI_CURRENT_CONTAINER_PORT": str(port or ""),
        "PAI_CONTAINER_HOST_PORT": str(port or ""),
        "PAI_CONTAINER_HOST_PORT_LIST": ";".join(f"{k}:{','.join(map(str, v))}" for k, v in me.ports.items()),
        "PAI_CURRENT_TASK_ROLE_TASK_COUNT": str(role.instances),
        "PAI_CURRENT_TASK_ROLE_CPU_COUNT": str(role.cpu),
        "PAI_CURRENT_TASK_ROLE_MEM_MB": str(role.memory_mb),
        "PAI_CURRENT_TASK_ROLE_GPU_COUNT": str(role.gpu),
        "PAI_CURRENT_TASK_ROLE_SHM_MB": str(role.shm_mb),
        "PAI_CURRENT_TASK_ROLE_MIN_FAILED_TASK_COUNT": str(min_failed),
        "PAI_CURRENT_TASK_ROLE_MIN_SUCCEEDED_TASK_COUNT": str(min_succeeded),
        "PAI_TASK_CPU_NUM": str(role.cpu),
        "PAI_TASK_MEM_MB": str(role.memory_mb),
        "PAI_TASK_GPU_NUM": str(role.gpu),
        "PAI_RESOURCE": f"{role.gpu},{role.cpu},{role.memory_mb},{role.shm_mb}",
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, me.gpus)),
        "PYTHONUNBUFFERED": "1",
    }
    if me.gpus:  # host ids, for the NVIDIA container runtime; without GPUs the runtime's default applies (docker: void)
        env["NVIDIA_VISIBLE_DEVICES"] = ",".join(map(str, me.gpus))
    if "ssh" in me.ports:
        env["PAI_CONTAINER_SSH_PORT"] = str(me.ports["ssh"][0])
    for label, ports in me.ports.items():
        env[f"PAI_CONTAINER_HOST_{label}_PORT_LIST"] = ",".join(map(str, ports))
    for kind, var in (("data", "PAI_DATA_DIR"), ("output", "PAI_OUTPUT_DIR"), ("script", "PAI_CODE_DIR")):
        pre = job.prerequisite(kind, getattr(role, kind))
        if pre is not None and pre.uri:
            env[var] = pre.uri[0] if isinstance(pre.uri, list) else pre.uri
    return env


# ---- the job's TensorBoard / log output directory ---------------------------------------------------------------
LOGS_VAR = "PAI_OUTPUT_LOGS"  # every job's tasks get it; the tensorboard plugin watches it unless told otherwise
JOB_LOGS_IN_CONTAINER = "/pai/output/logs"


def make_job_logs(job_dir: Path) -> Path:
    """``<job dir>/output/logs`` on the host, made (with the job dir) when missing: one per job, shared by its tasks
    and kept across attempts. The daemon makes it as it accepts the job (core/service.py): three new directories
    cost about a millisecond each on the machines this runs on, which would otherwise delay each queued job's
    start on the loop that starts tasks; a task start finds it there (one failed ``mkdir``)."""
    path = job_dir / "output" / "logs"
    with contextlib.suppress(FileExistsError):  # the task's to write: whatever it put there is not followed here
        path.mkdir(parents=True, exist_ok=True)
    return path


def job_logs_dir(task_dir: Path) -> Path:
    """The job's ``output/logs`` of a task dir (``<job dir>/a<attempt>.<role>-<index>.t<n>``), made when missing
    so a bind mount and the user's writes find it."""
    return make_job_logs(task_dir.parent)


def job_logs_env(task_dir: Path, view: TaskView) -> dict[str, str]:
    """``PAI_OUTPUT_LOGS`` of a plain job (an Estimator job's layout sets its own ``/ml/output/logs/``)."""
    return {LOGS_VAR: f"{view.path(job_logs_dir(task_dir), JOB_LOGS_IN_CONTAINER)}/"}


# ---- the job's checkpoints and how a preempted task is told (docs/checkpoint.md) ---------------------------------
CHECKPOINT_VAR = "PAI_CHECKPOINT_DIR"
JOB_CHECKPOINTS_IN_CONTAINER = "/pai/output/checkpoints"


def job_checkpoints_dir(task_dir: Path) -> Path:
    """``<job dir>/output/checkpoints``: one per job, kept across attempts (a preempted job's next attempt resumes
    from it), written by the task's account (under ``output``, which ``taskspec.owned_parts`` gives it)."""
    path = task_dir.parent / "output" / "checkpoints"
    with contextlib.suppress(FileExistsError):
        path.mkdir(parents=True, exist_ok=True)
    return path


def preemption_env(task_dir: Path, view: TaskView, grace_s: float, signal: str) -> dict[str, str]:
    """The checkpoint contract's variables: where to checkpoint, how long a preempted task has, and its signal."""
    where = view.path(job_checkpoints_dir(task_dir), JOB_CHECKPOINTS_IN_CONTAINER)
    return {
        CHECKPOINT_VAR: f"{where}/",
        "PAI_PREEMPT_GRACE_SECONDS": f"{grace_s:g}",
        "PAI_PREEMPT_SIGNAL": signal,
    }
