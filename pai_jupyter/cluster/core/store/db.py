"""The database connection every part of the store shares, and how values are kept in rows (JSON text,
milliseconds, OpenPAI's debugId)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .migrations import migrate


def debug_id(user: str, name: str) -> str:
    """OpenPAI's debugId: the md5 of the framework name (an id, not a security measure)."""
    return hashlib.md5(f"{user}~{name}".encode()).hexdigest()


def now_ms() -> int:
    return int(time.time() * 1000)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def loads(text: str | None, default: Any = None) -> Any:
    return json.loads(text) if text else default


class Database:
    """The connection: WAL, the schema brought up to date (``migrations``), one transaction at a time (``tx``),
    rows back as dicts."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.execute("PRAGMA busy_timeout=5000")
        migrate(self.db)  # the schema version and the steps to it: migrations.py

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One atomic transaction (nested calls join the outer one)."""
        if self.db.in_transaction:
            yield self.db
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        try:
            self.db.execute("COMMIT")
        except sqlite3.Error:  # e.g. a full disk: never leave the connection inside a failed transaction
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise

    def one(self, sql: str, args: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        row = self.db.execute(sql, args).fetchone()
        return dict(row) if row else None

    def all(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return [dict(r) for r in self.db.execute(sql, args).fetchall()]
