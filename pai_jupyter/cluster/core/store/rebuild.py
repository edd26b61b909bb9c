"""Rebuilding the jobs table so that its list item (the STORED generated column ``item``) says what
``schema.ITEM_FIELDS`` says now: SQLite cannot alter a STORED column, so a field joins the item through SQLite's
documented table rebuild. A migration that adds a job column the list shows calls ``item`` after its
``ALTER TABLE jobs ADD COLUMN`` (and runs with ``Migration.rebuilds``: foreign keys off, so dropping the old table
deletes no row of a table that refers to it, and checked before the step commits)."""

from __future__ import annotations

import re
import sqlite3

from .schema import ITEM_FIELDS, item_expression

_ITEM = re.compile(r"item TEXT GENERATED ALWAYS AS \((?P<expr>.*)\) STORED", re.DOTALL)
_TABLE = re.compile(r'CREATE TABLE (IF NOT EXISTS )?"?jobs"? ')


def item(db: sqlite3.Connection, fields: tuple[tuple[str, str], ...] = ITEM_FIELDS) -> None:
    """Rebuild ``jobs`` with its list item made of ``fields``, every row, index and reference kept (inside the
    caller's transaction)."""
    sql = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone()[0]
    found, table = _ITEM.search(sql), _TABLE.match(sql)
    if found is None or table is None:
        raise RuntimeError("the jobs table has no list item column to rebuild")
    made = sql[: found.start("expr")] + item_expression(fields) + sql[found.end("expr") :]
    made = "CREATE TABLE jobs_rebuilt " + made[table.end() :]
    columns = ", ".join(r[1] for r in db.execute("PRAGMA table_xinfo(jobs)") if r[6] == 0)  # not generated
    indexes = [
        r[0] for r in db.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'") if r[0]
    ]
    db.execute(made)
    db.execute(f"INSERT INTO jobs_rebuilt ({columns}) SELECT {columns} FROM jobs")
    db.execute("DROP TABLE jobs")
    db.execute("ALTER TABLE jobs_rebuilt RENAME TO jobs")
    for index in indexes:
        db.execute(index)
