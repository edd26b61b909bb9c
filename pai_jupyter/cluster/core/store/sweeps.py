"""Two tables of their own for sweeps (docs/sweeps.md): the metrics a job reported (``job_reports``) and each
sweep's state document (``sweeps``), with all their SQL.

``ensure_tables`` makes both (``CREATE TABLE IF NOT EXISTS``), so a database made before sweeps gains them when a
sweep route is first used (``http/sweeps.py``); it is one self-contained function for the store's migrations to
call in their turn.
"""

from __future__ import annotations

import weakref
from typing import Any, TypedDict, cast

from .db import Database, dumps, loads, now_ms

TABLES = """
CREATE TABLE IF NOT EXISTS job_reports (
  id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  time INTEGER NOT NULL, step INTEGER, metrics TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS job_reports_by_job ON job_reports (job_id, id);
CREATE TABLE IF NOT EXISTS sweeps (
  user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE, name TEXT NOT NULL,
  revision INTEGER NOT NULL, updated INTEGER NOT NULL, state TEXT NOT NULL, PRIMARY KEY (user, name));
"""
MAX_REPORTS = 100_000  # per job: a trial that reports every step of a long run keeps its newest ones


class Report(TypedDict):
    time: int
    step: int | None
    metrics: dict[str, float]


class SweepRow(TypedDict):
    user: str
    name: str
    revision: int
    updated: int
    state: dict[str, Any]


_READY: weakref.WeakSet[Database] = weakref.WeakSet()


def ensure_tables(store: Database) -> None:
    """Make the sweep tables where they are missing (idempotent; once per open store)."""
    if store not in _READY:
        store.db.executescript(TABLES)
        _READY.add(store)


def add_reports(store: Database, job_id: int, reports: list[Report]) -> None:
    with store.tx() as db:
        db.executemany(
            "INSERT INTO job_reports (job_id, time, step, metrics) VALUES (?, ?, ?, ?)",
            [(job_id, r["time"], r["step"], dumps(r["metrics"])) for r in reports],
        )
        db.execute(
            "DELETE FROM job_reports WHERE job_id = ? AND id <= "
            "(SELECT id FROM job_reports WHERE job_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
            (job_id, job_id, MAX_REPORTS),
        )


def reports(store: Database, job_id: int) -> list[Report]:
    rows = store.all("SELECT time, step, metrics FROM job_reports WHERE job_id = ? ORDER BY id", (job_id,))
    return [{"time": r["time"], "step": r["step"], "metrics": loads(r["metrics"], {})} for r in rows]


def _row(row: dict[str, Any] | None) -> SweepRow | None:
    if row is None:
        return None
    return cast(SweepRow, {**row, "state": loads(row["state"], {})})


def sweep(store: Database, user: str, name: str) -> SweepRow | None:
    return _row(store.one("SELECT * FROM sweeps WHERE user = ? AND name = ?", (user, name)))


def sweeps(store: Database, user: str | None) -> list[SweepRow]:
    """A user's sweeps (every user's for None), newest first."""
    where, args = ("WHERE user = ?", (user,)) if user is not None else ("", ())
    rows = store.all(f"SELECT * FROM sweeps {where} ORDER BY updated DESC", args)
    return [r for r in map(_row, rows) if r is not None]


def put_sweep(store: Database, user: str, name: str, state: dict[str, Any], revision: int) -> int | None:
    """Write the state if the stored one is at ``revision`` (0: none yet); the new revision, or None when another
    writer was first (optimistic concurrency: two drivers of one sweep cannot both write)."""
    with store.tx() as db:
        row = db.execute("SELECT revision FROM sweeps WHERE user = ? AND name = ?", (user, name)).fetchone()
        current = row[0] if row else 0
        if current != revision:
            return None
        db.execute(
            "INSERT INTO sweeps (user, name, revision, updated, state) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (user, name) DO UPDATE SET revision = excluded.revision, updated = excluded.updated, "
            "state = excluded.state",
            (user, name, current + 1, now_ms(), dumps(state)),
        )
        return current + 1


def delete_sweep(store: Database, user: str, name: str) -> bool:
    with store.tx() as db:
        return db.execute("DELETE FROM sweeps WHERE user = ? AND name = ?", (user, name)).rowcount > 0
