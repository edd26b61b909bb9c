"""What a job reported (docs/sweeps.md): the reports posted for it (the store's ``job_reports``), those its tasks
wrote to ``run/reports.jsonl`` (``common/reports.py``) and the scalars of their TensorBoard event files in
``run/tensorboard`` (``common/tfevents.py``). A task writes those files: they are read through safeio (no link
followed, bounded). The REST answers them (``http/sweeps.py``) and the tracker puts them in the job's MLflow run.
"""

from __future__ import annotations

import os
from typing import Any

from ...common import reports as rep
from ...common import safeio, tfevents
from .store import Store
from .store import sweeps as table

MAX_FILE = 4 * 1024 * 1024  # of a task's reports file that is read
TENSORBOARD = "run/tensorboard"  # a task's default TensorBoard log dir (task/services.py), its runs one level down
MAX_EVENT_FILES = 32
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _entries(task_dir: str, rel: str) -> list[tuple[str, bool]]:
    """(name, is a directory) of the regular files and directories in ``task_dir/rel``, opened without following
    links (a task writes there); none when it is missing or not a directory."""
    try:
        fd = safeio.open_beneath(task_dir, rel, _DIR)
    except OSError:
        return []
    try:
        with os.scandir(fd) as found:
            items = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in found]
    finally:
        os.close(fd)
    return sorted((name, is_dir) for name, is_dir, is_file in items if is_dir or is_file)


def event_reports(task_dir: str) -> list[dict[str, Any]]:
    """The scalars of the task's TensorBoard event files as reports; a run's tags are named ``run/tag``."""
    files: list[tuple[str, str]] = []  # (path beneath the task dir, run)
    for name, is_dir in _entries(task_dir, TENSORBOARD):
        if is_dir:
            inner = _entries(task_dir, f"{TENSORBOARD}/{name}")
            files += [(f"{TENSORBOARD}/{name}/{f}", name) for f, d in inner if not d and "tfevents" in f]
        elif "tfevents" in name:
            files.append((f"{TENSORBOARD}/{name}", ""))
    out = []
    for path, run in files[:MAX_EVENT_FILES]:
        for item in tfevents.scalars(safeio.read_beneath(task_dir, path, MAX_FILE) or b""):
            if run:
                item["metrics"] = {f"{run}/{tag}": v for tag, v in item["metrics"].items()}
            out.append(item)
    return out


def file_reports(store: Store, job_id: int, attempt: int, tensorboard: bool = True) -> list[dict[str, Any]]:
    """The reports each task of the attempt wrote to its reports file, then (``tensorboard``) its TensorBoard
    scalars."""
    out: list[dict[str, Any]] = []
    for task in store.tasks(job_id, attempt):
        if not task["task_dir"]:
            continue
        where = f"{task['role']}/{task['idx']}"
        data = safeio.read_beneath(task["task_dir"], rep.FILE, MAX_FILE)
        for item in rep.parse_lines(data.decode("utf-8", "replace") if data else ""):
            out.append({**item, "source": where})
        if tensorboard:
            out += [{**item, "source": f"tensorboard:{where}"} for item in event_reports(task["task_dir"])]
    return out


def job_reports(store: Store, job_id: int, attempt: int) -> list[dict[str, Any]]:
    """The job's reports: those posted, then those its tasks wrote, oldest first."""
    stored = [{**r, "source": "api"} for r in table.reports(store, job_id)]
    found = stored + file_reports(store, job_id, attempt)
    found.sort(key=lambda r: r["time"])
    return found


def reported(store: Store, job_id: int, attempts: int) -> list[dict[str, Any]]:
    """What ``pai_jupyter.report()`` and the REST recorded for the job over its attempts up to ``attempts`` (not its
    TensorBoard scalars, whose names MLflow may refuse): what its MLflow run must hold."""
    table.ensure_tables(store)
    found: list[dict[str, Any]] = [dict(r) for r in table.reports(store, job_id)]
    for attempt in range(attempts + 1):
        found += file_reports(store, job_id, attempt, tensorboard=False)
    return found
