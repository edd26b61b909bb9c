"""Which MLflow run is each job's (``tracking_runs``, migration 3): one run per job, kept across its attempts;
each sweep's parent run (``tracking_sweeps``); and each user's experiment (``tracking_users``, migration 4)."""

from __future__ import annotations

from typing import NamedTuple

from .db import Database


class TrackedRun(NamedTuple):
    run_id: str
    experiment_id: str


def save_run(store: Database, job_id: int, run: TrackedRun) -> None:
    store.db.execute(
        "INSERT OR REPLACE INTO tracking_runs (job_id, run_id, experiment_id) VALUES (?, ?, ?)",
        (job_id, run.run_id, run.experiment_id),
    )


def run_of(store: Database, job_id: int) -> TrackedRun | None:
    row = store.db.execute("SELECT run_id, experiment_id FROM tracking_runs WHERE job_id = ?", (job_id,)).fetchone()
    return TrackedRun(str(row[0]), str(row[1])) if row else None


def sweep_run(store: Database, user: str, sweep: str) -> str | None:
    row = store.db.execute("SELECT run_id FROM tracking_sweeps WHERE user = ? AND sweep = ?", (user, sweep)).fetchone()
    return str(row[0]) if row else None


def save_sweep_run(store: Database, user: str, sweep: str, run_id: str) -> None:
    store.db.execute(
        "INSERT OR REPLACE INTO tracking_sweeps (user, sweep, run_id) VALUES (?, ?, ?)", (user, sweep, run_id)
    )


def jobs_of_runs(store: Database, run_ids: list[str]) -> dict[str, int]:
    """run id -> job id of those of ``run_ids`` that are a job's run."""
    out: dict[str, int] = {}
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for run_id, job_id in store.db.execute(
            f"SELECT run_id, job_id FROM tracking_runs WHERE run_id IN ({marks})", chunk
        ).fetchall():
            out[str(run_id)] = int(job_id)
    return out


def user_experiment(store: Database, user: str) -> tuple[str, str] | None:
    """(id, name) of the experiment the daemon made as ``user``."""
    row = store.db.execute("SELECT experiment_id, name FROM tracking_users WHERE user = ?", (user,)).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def save_user_experiment(store: Database, user: str, experiment_id: str, name: str) -> None:
    store.db.execute(
        "INSERT OR REPLACE INTO tracking_users (user, experiment_id, name) VALUES (?, ?, ?)",
        (user, experiment_id, name),
    )
