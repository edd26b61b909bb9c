"""Everything one task attempt needs from the job: its script, environment, image, limits and mounts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...protocol import Job, TaskRole, render_commands
from ...protocol.render import MASK
from ..runtime import taskdir
from ..runtime.base import TaskSpec
from ..runtime.view import Mount, TaskView
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
    view: TaskView,
    home: Path,
    layout: Layout | None,
    host_paths: bool = False,
    run_as: tuple[int, int] | None = None,
    priority: str | None = None,
    preemption: tuple[float, str] = (30.0, "TERM"),
    more_env: dict[str, str] | None = None,
) -> TaskSpec:
    """The TaskSpec of task row ``t`` (the directories are made by ``prepare_task_dir``), as the runtime's ``view``
    shows the job's files to its tasks. With ``host_paths`` (the job's owner is an admin), a Docker task also sees
    its data / output / code dirs when they are existing host directories, at the same paths (data and code
    read-only). ``run_as``: the (uid, gid) of the account the task runs as (None: the daemon's; the job's ssh key
    is readable by that group, its HOME is the user's home). ``priority``: the job's class (a batch system's
    scheduler weighs it). ``preemption``: the job's grace (seconds) and signal name (core/sharing.py).
    ``more_env``: the cluster's own variables (its MLflow run's)."""
    role = job.role(t["role"])
    assert t["task_dir"] is not None  # set when the task was launched (STARTING)
    td = Path(t["task_dir"])
    key = f"{row['user']}~{row['name']}.a{t['attempt']}.{t['role']}.{t['idx']}.t{t['task_attempt']}"
    extra = {
        "PAI_USER_HOME": view.path(home, "/userhome"),
        "PAI_TASK_DIR": view.path(td, taskdir.IN_CONTAINER),
        "PAI_CONTAINER_ID": key,
        **job_logs_env(td, view),
        **preemption_env(td, view, *preemption),
    }
    env = task_env(job, row["user"], row["vc"], role, t["idx"], placements, extra=extra)
    script = view.script(render_commands(job, role))
    own = json.loads(t.get("services") or "{}") or {}
    comment = f"pai-job {row['user']}~{row['name']}"
    own = sshd.enrich(own, td.parent, home, view=view, comment=comment, group=run_as[1] if run_as else None)
    if own:  # in the background, before anything else, so the user's command is not held up
        script = f"{services.supervisor(own)}\n{script}"
        env.update(services.token_env(own))
    image = job.image_for(role)
    mounts = _mounts(view, home, td, own, job, role, host_paths)
    work_dir = view.work_dir(td / taskdir.WORK, None)
    if layout is not None:
        env.update(layout.env(view))
        mounts += layout.mounts(view)
        work_dir = layout.work_dir(view)
        if layout.spec.get("sourceDir"):
            script = f"{REQUIREMENTS}\n{script}"
    env.update(more_env or {})
    if run_as is not None:  # the account's own HOME: the user's home as the task sees it
        env.setdefault("HOME", env["PAI_USER_HOME"])
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
        run_as=run_as,
        priority=priority,
    )


def _mounts(
    view: TaskView, home: Path, td: Path, own: dict[str, Any], job: Job, role: TaskRole, host_paths: bool
) -> list[Mount]:
    """What makes the paths a task is told true where it runs (none on the host): the user's home, the job's logs
    and checkpoints, its ssh key, and an admin's existing data / output / code directories at their own paths."""
    mounts = view.share(home, "/userhome")
    mounts += view.share(job_logs_dir(td), JOB_LOGS_IN_CONTAINER)
    mounts += view.share(job_checkpoints_dir(td), JOB_CHECKPOINTS_IN_CONTAINER)
    mounts += sshd.mounts(own, td.parent, view)
    if host_paths:
        for kind in ("data", "output", "script"):
            p = job.prerequisite(kind, getattr(role, kind))
            uri = (p.uri[0] if isinstance(p.uri, list) and p.uri else p.uri) if p is not None else None
            if isinstance(uri, str) and uri.startswith("/") and Path(uri).is_dir():
                mounts += view.share_same(uri, read_only=kind != "output")
    return mounts


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
