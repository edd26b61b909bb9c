"""The store's schema versions: a ``state.db`` written before versions existed opens with today's code, keeps
its data and gains what later migrations add; a fresh database and a migrated one end with the same schema.

tests/data/state-before-versions.db was written by main at 385c855 (its store had no ``user_version``) with
its own ``Store``: user alice (admin, password, e-mail, a token), job mnist (SUCCEEDED, two tasks with
services, an event, tag ``fixture``) and job queued (WAITING, priority ``prod``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from pai_jupyter.cluster.core.store import Store, check_password, rebuild
from pai_jupyter.cluster.core.store.migrations import MIGRATIONS, Migration, NewerDatabase, migrate, version
from pai_jupyter.cluster.core.store.schema import ITEM_FIELDS
from tests.helpers.store import old_database


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return old_database(tmp_path)


def schema_of(path: Path) -> set[tuple[str, str]]:
    with sqlite3.connect(path) as c:
        return {(r[0], r[1]) for r in c.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")}


def columns(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as c:
        return [r[1] for r in c.execute(f"PRAGMA table_xinfo({table})")]


def test_a_database_from_before_versions_opens_at_the_latest_version_with_its_data(old_db: Path) -> None:
    store = Store(old_db)
    try:
        assert version(store.db) == len(MIGRATIONS)
        user = store.user("alice")
        assert user is not None and user["admin"] == 1 and check_password("pw-alice", user["password_hash"])
        assert store.email_of("alice") == "alice@example.com" and len(store.tokens("alice")) == 1
        mnist = store.job("alice", "mnist")
        assert mnist is not None and mnist["state"] == "SUCCEEDED" and mnist["config_text"].startswith("protocol")
        assert [t["state"] for t in store.tasks(mnist["id"])] == ["SUCCEEDED", "SUCCEEDED"]
        assert [e["reason"] for e in store.events(mnist["id"])] == ["Completed"]
        assert store.list_item(mnist["id"])["tags"] == ["fixture"]
        queued = store.job("alice", "queued")
        assert queued is not None and queued["priority"] == "prod"
    finally:
        store.close()


def test_a_fresh_database_and_a_migrated_one_have_the_same_schema(old_db: Path, tmp_path: Path) -> None:
    Store(old_db).close()
    Store(tmp_path / "fresh.db").close()
    assert schema_of(old_db) == schema_of(tmp_path / "fresh.db")


def test_a_new_column_and_table_reach_an_old_database_and_keep_its_rows(old_db: Path) -> None:
    more = (
        *MIGRATIONS,
        Migration(
            len(MIGRATIONS) + 1,
            "a column and a table as a later feature would add them",
            "ALTER TABLE jobs ADD COLUMN note TEXT NOT NULL DEFAULT 'none';\n"
            "CREATE TABLE IF NOT EXISTS job_notes (job_id INTEGER REFERENCES jobs(id) ON DELETE CASCADE, text TEXT);",
        ),
        Migration(
            len(MIGRATIONS) + 2,
            "data moved by a function",
            lambda db: db.execute("INSERT INTO job_notes SELECT id, name || ' noted' FROM jobs"),
        ),
    )
    with sqlite3.connect(old_db, isolation_level=None) as c:
        assert migrate(c, more) == len(MIGRATIONS) + 2
        assert migrate(c, more) == len(MIGRATIONS) + 2  # again: nothing to do
        notes = c.execute("SELECT j.name, j.note, n.text FROM jobs j JOIN job_notes n ON n.job_id = j.id ORDER BY 1")
        assert notes.fetchall() == [("mnist", "none", "mnist noted"), ("queued", "none", "queued noted")]
    assert "note" in columns(old_db, "jobs") and "item" in columns(old_db, "jobs")
    # this code knows fewer versions than the database has: it refuses rather than write an unknown schema
    with pytest.raises(NewerDatabase, match="newer than this pai_jupyter knows"):
        Store(old_db)


def test_a_failing_step_leaves_the_last_whole_version(old_db: Path) -> None:
    broken = (
        *MIGRATIONS,
        Migration(len(MIGRATIONS) + 1, "half done", "ALTER TABLE jobs ADD COLUMN half TEXT; SELECT * FROM nowhere;"),
    )
    with sqlite3.connect(old_db, isolation_level=None) as c:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            migrate(c, broken)
        assert version(c) == len(MIGRATIONS)
    assert "half" not in columns(old_db, "jobs")


def test_migrations_are_numbered_in_order(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "x.db", isolation_level=None) as c:
        with pytest.raises(ValueError, match="numbered"):
            migrate(c, (*MIGRATIONS, Migration(len(MIGRATIONS) + 2, "a gap", "SELECT 1")))
        assert version(c) == 0


def test_the_list_item_grows_by_one_field_entry_and_one_migration(old_db: Path) -> None:
    """SQLite cannot alter the STORED list item: a field joins it by a migration that adds its column and rebuilds
    jobs from ``ITEM_FIELDS`` (``rebuild.item``). Every row, index and child row stays; foreign keys hold after."""
    grown = (*ITEM_FIELDS, ("note", "note"))

    def add_note(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE jobs ADD COLUMN note TEXT NOT NULL DEFAULT 'none'")
        rebuild.item(db, grown)

    more = (*MIGRATIONS, Migration(len(MIGRATIONS) + 1, "a field the list shows", add_note, rebuilds=True))
    with sqlite3.connect(old_db, isolation_level=None) as c:
        c.execute("PRAGMA foreign_keys = ON")
        before = {
            r[0]: r[1] for r in c.execute("SELECT name, (SELECT count(*) FROM tasks WHERE job_id = id) FROM jobs")
        }
        assert migrate(c, more) == len(MIGRATIONS) + 1
        items = {r[0]: json.loads(r[1]) for r in c.execute("SELECT name, item FROM jobs")}
        assert {name: item["note"] for name, item in items.items()} == {"mnist": "none", "queued": "none"}
        assert items["queued"]["jobPriority"] == "prod" and list(items["mnist"])[-1] == "note"  # in ITEM_FIELDS' order
        after = {r[0]: r[1] for r in c.execute("SELECT name, (SELECT count(*) FROM tasks WHERE job_id = id) FROM jobs")}
        assert after == before and before["mnist"] == 2  # the tasks (rows of a table that refers to jobs) stay
        indexes = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'")}
        assert {"jobs_by_submission", "jobs_by_state"} <= indexes
        assert c.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with pytest.raises(sqlite3.IntegrityError):  # references are enforced again
            c.execute("INSERT INTO events (job_id, time, type, reason, message) VALUES (999, 0, 'x', 'y', 'z')")


def test_a_rebuild_that_would_leave_dangling_rows_is_refused(old_db: Path) -> None:
    """The check the rebuild runs under (foreign keys off) can fail: a step that drops a job its tasks refer to."""

    def drop_a_job(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM jobs WHERE name = 'mnist'")  # (foreign keys are off: its tasks stay, pointing nowhere)
        rebuild.item(db)

    more = (*MIGRATIONS, Migration(len(MIGRATIONS) + 1, "a bad step", drop_a_job, rebuilds=True))
    with sqlite3.connect(old_db, isolation_level=None) as c:
        with pytest.raises(RuntimeError, match="pointing nowhere"):
            migrate(c, more)
        assert version(c) == len(MIGRATIONS)
        assert c.execute("SELECT count(*) FROM jobs WHERE name = 'mnist'").fetchone()[0] == 1
