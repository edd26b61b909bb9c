"""The job list item (the STORED generated column ``item`` of jobs, schema.ITEM_FIELDS): a database made by the
code from before versions (tests/data/state-before-versions.db: job ``mnist`` tagged ``fixture``, job ``queued``
of priority class ``prod``) lists, once migrated, exactly what that code listed, field for field and in order; and
the stored item of a migrated and of a fresh database is what ``ITEM_FIELDS`` says, row for row."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.cluster.core.store import Store
from pai_jupyter.cluster.core.store.schema import ITEM_FIELDS, item_expression
from tests.helpers.store import old_database


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    return old_database(tmp_path)


def old_answer(path: Path) -> list[list[tuple[str, Any]]]:
    """What the old code's list said, newest first: its stored item (jobPriority always "default") with the tags
    and the priority class put in by ``json_set`` at each list."""
    with sqlite3.connect(path) as c:
        rows = c.execute(
            "SELECT item, (SELECT json_group_array(tag) FROM job_tags g WHERE g.job_id = jobs.id), "
            "(SELECT priority FROM job_priority p WHERE p.job_id = jobs.id) FROM jobs "
            "ORDER BY submission_time DESC, id DESC"
        ).fetchall()
    out = []
    for item, tags, priority in rows:
        fields = json.loads(item)
        fields["tags"], fields["jobPriority"] = json.loads(tags), priority or "default"
        out.append(list(fields.items()))
    return out


def listed(store: Store, **kwargs: Any) -> list[list[tuple[str, Any]]]:
    text, _ = store.list_json(**kwargs)
    return [list(item.items()) for item in json.loads(text)]


def test_a_migrated_database_lists_what_the_old_code_listed(old_db: Path) -> None:
    before = old_answer(old_db)
    assert [dict(i)["jobPriority"] for i in before] == ["prod", "default"]  # (the fixture has both kinds)
    assert [dict(i)["tags"] for i in before] == [[], ["fixture"]]
    store = Store(old_db)
    try:
        assert listed(store) == before
        with store.tx():  # untagged: the list answers the stored item alone, no subquery
            store.db.execute("DELETE FROM job_tags")
        assert listed(store) == [[(k, [] if k == "tags" else v) for k, v in i] for i in before]
        assert [dict(i)["name"] for i in listed(store, priorities=["prod"])] == ["queued"]
        assert [dict(i)["name"] for i in listed(store, order="jobPriority,ASC")] == ["queued", "mnist"]  # NULL last
    finally:
        store.close()


def stored_and_made(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as c:
        return c.execute(f"SELECT item, {item_expression()} FROM jobs ORDER BY id").fetchall()


def test_the_stored_item_is_what_item_fields_says_migrated_or_fresh(old_db: Path, tmp_path: Path) -> None:
    Store(old_db).close()
    fresh = tmp_path / "fresh" / "state.db"
    fresh.parent.mkdir()
    store = Store(fresh)
    try:
        with store.tx():
            job = store.insert_job(
                "bob", "fresh", vc="default", now=1, total_gpu=1, total_tasks=2, total_roles=1,
                config_format="v2", config_text="{}", model="{}",
            )  # fmt: skip
            store.set_priority(job, "crit", None)
    finally:
        store.close()
    for path in (old_db, fresh):
        rows = stored_and_made(path)
        assert rows and all(stored == made for stored, made in rows)
        assert all(list(json.loads(stored)) == [k for k, _ in ITEM_FIELDS] for stored, _ in rows)
    assert json.loads(stored_and_made(fresh)[0][0])["jobPriority"] == "crit"
