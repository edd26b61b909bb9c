"""The store's schema version (SQLite's ``PRAGMA user_version``) and the ordered steps that bring any
``state.db`` up to it, so a new table or column reaches the databases of clusters that already exist.

A database made before versions existed reads 0 and already holds version 1's tables (``SCHEMA``, all
``IF NOT EXISTS``, so step 1 is a no-op on it); a fresh one runs every step in order. Each step runs in its own
transaction with the version it brings, so a daemon killed mid-way leaves the last whole version. A database
newer than this code (a downgrade) is refused rather than written with a schema it does not know.

To add a table or column: append ONE ``Migration`` with the next number and its SQL (``ALTER TABLE jobs ADD
COLUMN ...``, ``CREATE TABLE IF NOT EXISTS ...``) or a function of the connection (to move data); never edit
``SCHEMA`` or a step that has shipped (tests/unit/test_store_migrations.py opens a database from before versions).
A job column the list shows is also one entry of ``schema.ITEM_FIELDS``, and its step a function that adds the
column and calls ``rebuild.item`` (``rebuilds=True``), as step 5 does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import rebuild
from .schema import SCHEMA


@dataclass(frozen=True)
class Migration:
    """One step: the version it brings the database to, why, and the SQL script or function that does it."""

    version: int
    why: str
    step: str | Callable[[sqlite3.Connection], object]
    rebuilds: bool = False  # it rebuilds a table (``rebuild.py``): foreign keys off while it runs, checked after


def _priority_in_the_row(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE jobs ADD COLUMN priority TEXT")
    db.execute("UPDATE jobs SET priority = (SELECT priority FROM job_priority p WHERE p.job_id = jobs.id)")
    db.execute("DELETE FROM job_priority WHERE queue_key IS NULL")
    db.execute("ALTER TABLE job_priority DROP COLUMN priority")
    rebuild.item(db)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "the tables as they were before versions: users, tokens, jobs, tasks, events, tags", SCHEMA),
    Migration(
        2,
        "the users a JupyterHub made (core/hub.py): only those are offboarded when the Hub no longer has them",
        "CREATE TABLE IF NOT EXISTS hub_users ("
        "user TEXT PRIMARY KEY REFERENCES users(name) ON DELETE CASCADE, created REAL NOT NULL)",
    ),
    Migration(
        3,
        "each job's MLflow run (cluster/tracking/): made at the submission, told the job's states, given to its "
        "tasks; and each sweep's parent run",
        "CREATE TABLE IF NOT EXISTS tracking_runs ("
        "job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE, "
        "run_id TEXT NOT NULL, experiment_id TEXT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS tracking_sweeps ("
        "user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE, sweep TEXT NOT NULL, "
        "run_id TEXT NOT NULL, PRIMARY KEY (user, sweep))",
    ),
    Migration(
        4,
        "each user's MLflow experiment, by id (cluster/tracking/): the one the daemon made as them, never another "
        "that someone else made under the same name",
        "CREATE TABLE IF NOT EXISTS tracking_users ("
        "user TEXT PRIMARY KEY REFERENCES users(name) ON DELETE CASCADE, "
        "experiment_id TEXT NOT NULL, name TEXT NOT NULL)",
    ),
    Migration(
        5,
        "a job's priority class in its row and in its list item (was a json_set on every list), its place in the "
        "line stays in job_priority; the item made from schema.ITEM_FIELDS, so that it can grow",
        _priority_in_the_row,
        rebuilds=True,
    ),
)


class NewerDatabase(RuntimeError):
    """The database was written by a newer pai_jupyter than this one."""


def version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, one at a time (``execute`` runs one; ``executescript`` would commit)."""
    buf = ""
    for part in script.split(";"):
        buf += part + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n\t;"):
                yield buf.strip()
            buf = ""
    if buf.strip(" \n\t;"):
        raise ValueError(f"an incomplete SQL statement: {buf.strip()[:80]!r}")


def migrate(db: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Run the steps the database has not had yet (on a connection in autocommit mode); returns its version."""
    if [m.version for m in migrations] != list(range(1, len(migrations) + 1)):
        raise ValueError("migrations must be numbered 1, 2, 3, ... in order")
    latest = len(migrations)
    if version(db) > latest:
        raise NewerDatabase(
            f"this state.db has schema version {version(db)}, newer than this pai_jupyter knows ({latest}): "
            "run the pai_jupyter that wrote it, or a newer one"
        )
    for m in migrations:
        if version(db) >= m.version:  # read again: another process may have migrated meanwhile
            continue
        keys = db.execute("PRAGMA foreign_keys").fetchone()[0]
        if m.rebuilds:  # (a no-op inside a transaction: set before it begins)
            db.execute("PRAGMA foreign_keys = OFF")
        db.execute("BEGIN IMMEDIATE")
        try:
            if version(db) < m.version:
                if isinstance(m.step, str):
                    for sql in statements(m.step):
                        db.execute(sql)
                else:
                    m.step(db)
                if m.rebuilds and (broken := db.execute("PRAGMA foreign_key_check").fetchall()):
                    raise RuntimeError(f"migration {m.version} would leave rows pointing nowhere: {broken[:5]}")
                db.execute(f"PRAGMA user_version = {int(m.version)}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        finally:
            db.execute(f"PRAGMA foreign_keys = {int(keys)}")
    return version(db)
