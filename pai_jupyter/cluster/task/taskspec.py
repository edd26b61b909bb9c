"""Everything one task attempt needs from the job: its script, environment, image, limits and mounts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...protocol import Job, containerpaths, render_commands
from ...protocol.render import MASK
from ..runtime import taskdir
from ..runtime.base import Mount, TaskSpec
from . import services, sshd
from .env import (
    JOB_CHECKPOINTS_IN_CONTAINER,
    JOB_LOGS_IN_CONTAINER,
    Placement,
    job_checkpoints_dir,
    job_logs_dir,
    job_logs_env,
    preemption_env,
    task_env,
)
from .estimator import REQUIREMENTS, Layout

if TYPE_CHECKING:
    from ..core.store import JobCore, TaskRow  # the rows core/ hands in (core/ imports this module)


def task_spec(
    row: JobCore,
    job: Job,
    t: TaskRow,
    placements: dict[tuple[str, int], Placement],
    *,
    in_container: bool,
    home: Path,
    layout: Layout | None,
    host_paths: bool = False,
    key_group: int | None = None,
    preemption: tuple[float, str] = (30.0, "TERM"),
) -> TaskSpec:
    """The TaskSpec of task row ``t`` (the directories are made by ``prepare_task_dir``). With ``host_paths``
    (the job's owner is an admin), a Docker task also sees its data / output / code dirs when they are
    existing host directories, at the same paths (data and code read-only). ``key_group``: the gid of the
    account the task runs as (the job's ssh key is readable by that group). ``preemption``: the job's grace
    (seconds) and signal name (core/sharing.py)."""
    role = job.role(t["role"])
    assert t["task_dir"] is not None  # set when the task was launched (STARTING)
    td = Path(t["task_dir"])
    key = f"{row['user']}~{row['name']}.a{t['attempt']}.{t['role']}.{t['idx']}.t{t['task_attempt']}"
    extra = {
        "PAI_USER_HOME": "/userhome" if in_container else str(home),
        "PAI_TASK_DIR": taskdir.IN_CONTAINER if in_container else str(td),
        "PAI_CONTAINER_ID": key,
        **job_logs_env(td, in_container),
        **preemption_env(td, in_container, *preemption),
    }
    env = task_env(job, row["user"], row["vc"], role, t["idx"], placements, extra=extra)
    script = render_commands(job, role)
    if not in_container:  # /userhome: the same directory through $PAI_USER_HOME (protocol/containerpaths.py)
        script, changed = containerpaths.rewrite(script)
        script = f"{containerpaths.rewrite_notice()}\n{script}" if changed else script
    own = json.loads(t.get("services") or "{}") or {}
    comment = f"pai-job {row['user']}~{row['name']}"
    own = sshd.enrich(own, td.parent, home, in_container=in_container, comment=comment, group=key_group)
    if own:  # in the background, before anything else, so the user's command is not held up
        script = f"{services.supervisor(own)}\n{script}"
        env.update(services.token_env(own))
    image = job.image_for(role)
    mounts = [Mount(str(home), "/userhome")] if in_container else []
    if in_container:
        mounts.append(Mount(str(job_logs_dir(td)), JOB_LOGS_IN_CONTAINER))
        mounts.append(Mount(str(job_checkpoints_dir(td)), JOB_CHECKPOINTS_IN_CONTAINER))
    mounts += sshd.mounts(own, td.parent) if in_container else []
    if in_container and host_paths:
        for kind in ("data", "output", "script"):
            p = job.prerequisite(kind, getattr(role, kind))
            uri = (p.uri[0] if isinstance(p.uri, list) and p.uri else p.uri) if p is not None else None
            if isinstance(uri, str) and uri.startswith("/") and Path(uri).is_dir():
                mounts.append(Mount(uri, uri, read_only=kind != "output"))
    work_dir = None if in_container else str(td / taskdir.WORK)
    if layout is not None:
        env.update(layout.env(in_container))
        mounts += layout.mounts() if in_container else []
        work_dir = layout.work_dir(in_container)
        if layout.spec.get("sourceDir"):
            script = f"{REQUIREMENTS}\n{script}"
    return TaskSpec(
        key=key,
        user=row["user"],
        job_name=row["name"],
        role=t["role"],
        index=t["idx"],
        job_attempt=t["attempt"],
        task_attempt=t["task_attempt"],
        script=script,
        env=env,
        image=image,
        cpu=role.cpu,
        memory_mb=role.memory_mb,
        shm_mb=role.shm_mb,
        gpus=json.loads(t["gpus"] or "[]"),
        task_dir=td,
        work_dir=work_dir,
        mounts=mounts,
        shown_script=masked_script(script, job.secrets),
        gpu_count=role.gpu,
        time_limit_minutes=job.max_run_time_minutes,
        vc=row["vc"],
    )


def _secret_values(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [v for x in value.values() for v in _secret_values(x)]
    if isinstance(value, list):
        return [v for x in value for v in _secret_values(x)]
    return [] if value is None or isinstance(value, bool) or str(value) == "" else [str(value)]


def masked_script(script: str, secrets: Any) -> str | None:
    """The script with every secret value replaced by ``******`` (what command.sh on disk may show), or None
    when it holds none: the script with the secrets reaches the shell only in memory (see runtime/shim.c)."""
    shown = script
    for value in sorted(set(_secret_values(secrets)), key=len, reverse=True):
        shown = shown.replace(value, MASK)
    return None if shown == script else shown


def owned_parts(task_dir: Path) -> list[Path]:
    """The directories of a task's job that its account owns (it writes there): the job's output (TensorBoard's
    ``PAI_OUTPUT_LOGS``) and the Estimator's ``ml/`` top, when there; the job directory itself stays root's."""
    job_dir = task_dir.parent
    out = [job_dir / "output", job_logs_dir(task_dir), job_checkpoints_dir(task_dir)]
    return out + ([job_dir / "ml"] if (job_dir / "ml").is_dir() else [])


def prepare_task_dir(spec: TaskSpec) -> None:
    """Make the parent of the task's directory: the runtime makes the directory itself (the process runtime may
    move a ready one into place, see runtime/warm.py)."""
    spec.task_dir.parent.mkdir(parents=True, exist_ok=True)
