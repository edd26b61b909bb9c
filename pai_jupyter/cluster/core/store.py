"""SQLite state of the embedded cluster (WAL): users and tokens, jobs, attempts, tasks, events.

Only the daemon opens this database. Every write that changes a job happens in one transaction, so a
daemon killed at any moment leaves a consistent state to recover from.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...common.states import ACTIVE_TASK, LIVE_JOB

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
  name TEXT PRIMARY KEY, admin INTEGER NOT NULL DEFAULT 0, password_hash TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tokens (
  hash TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE,
  label TEXT, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY, user TEXT NOT NULL, name TEXT NOT NULL, debug_id TEXT NOT NULL,
  state TEXT NOT NULL, sub_state TEXT NOT NULL, execution_type TEXT NOT NULL DEFAULT 'START',
  vc TEXT NOT NULL, attempt INTEGER NOT NULL DEFAULT 0, retries INTEGER NOT NULL DEFAULT 0,
  submission_time INTEGER NOT NULL, created_time INTEGER, launched_time INTEGER, completed_time INTEGER,
  exit_code INTEGER, exit_diagnostics TEXT, exit_type TEXT, trigger_role TEXT, trigger_index INTEGER,
  total_gpu INTEGER NOT NULL, total_tasks INTEGER NOT NULL, total_roles INTEGER NOT NULL,
  config_format TEXT NOT NULL, waiting_reason TEXT, deadline REAL,
  item TEXT GENERATED ALWAYS AS (json_object(
      'debugId', debug_id, 'name', name, 'username', user, 'state', state, 'subState', sub_state,
      'executionType', execution_type, 'tags', json('[]'), 'retries', retries,
      'retryDetails', json_object('user', retries, 'platform', 0, 'resource', 0),
      'submissionTime', submission_time, 'createdTime', created_time, 'launchedTime', launched_time,
      'completedTime', completed_time, 'appExitCode', exit_code, 'virtualCluster', vc, 'totalGpuNumber', total_gpu,
      'totalTaskNumber', total_tasks, 'totalTaskRoleNumber', total_roles, 'jobPriority', 'default')) STORED,
  UNIQUE (user, name));
CREATE TABLE IF NOT EXISTS job_configs (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE, config_text TEXT NOT NULL, model TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_by_submission ON jobs (submission_time, id);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state);
CREATE TABLE IF NOT EXISTS attempts (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, attempt INTEGER NOT NULL,
  state TEXT NOT NULL, created_time INTEGER, launched_time INTEGER, completed_time INTEGER,
  exit_code INTEGER, exit_diagnostics TEXT, trigger_role TEXT, trigger_index INTEGER,
  PRIMARY KEY (job_id, attempt));
CREATE TABLE IF NOT EXISTS tasks (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, attempt INTEGER NOT NULL,
  role TEXT NOT NULL, idx INTEGER NOT NULL, task_attempt INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL, runtime TEXT, handle TEXT, host_ip TEXT, ports TEXT, gpus TEXT,
  cpu INTEGER NOT NULL, memory_mb INTEGER NOT NULL, gpu INTEGER NOT NULL,
  exit_code INTEGER, exit_diagnostics TEXT, created_time INTEGER, launched_time INTEGER, completed_time INTEGER,
  task_dir TEXT, stopping INTEGER NOT NULL DEFAULT 0, services TEXT,
  PRIMARY KEY (job_id, attempt, role, idx));
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks (state);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  time INTEGER NOT NULL, type TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL,
  role TEXT, idx INTEGER);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job_id, id);
CREATE TABLE IF NOT EXISTS job_tags (
  job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, tag TEXT NOT NULL, PRIMARY KEY (job_id, tag));
"""
# A job's list item with its tags (a tagged job is rare: the subquery runs only for those)
ITEM = ("CASE WHEN EXISTS (SELECT 1 FROM job_tags g WHERE g.job_id = jobs.id) THEN json_set(item, '$.tags', "
        "(SELECT json_group_array(tag) FROM job_tags g WHERE g.job_id = jobs.id)) ELSE item END")

LIST_ORDER_FIELDS = {
    "jobName": "name", "submissionTime": "submission_time", "username": "user", "vc": "vc",
    "retries": "retries", "totalTaskNumber": "total_tasks", "totalGpuNumber": "total_gpu", "state": "state",
    "completionTime": "completed_time",
}


# OpenPAI's list item, built by SQLite itself: listing 10,000 jobs must not cost 10,000 Python dicts.
# OpenPAI's list item is a STORED generated column of jobs, kept by SQLite itself on every write: listing
# 10,000 jobs is then reading one narrow column (the config and model live in job_configs), not building dicts.
CORE_COLUMNS = ("id, user, name, debug_id, state, sub_state, execution_type, vc, attempt, retries, submission_time, "
                "created_time, launched_time, completed_time, exit_code, exit_diagnostics, exit_type, trigger_role, "
                "trigger_index, total_gpu, total_tasks, total_roles, config_format, waiting_reason, deadline")


def _sql_set(group: frozenset[str]) -> str:
    """A state group of common.states as an SQL list: ``('RUNNING', 'STARTING')`` (constant names, no user text)."""
    return "(" + ", ".join(f"'{s}'" for s in sorted(group)) + ")"


def debug_id(user: str, name: str) -> str:
    """OpenPAI's debugId: the md5 of the framework name (an id, not a security measure)."""
    return hashlib.md5(f"{user}~{name}".encode()).hexdigest()


def now_ms() -> int:
    return int(time.time() * 1000)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def hash_password(password: str, salt: bytes | None = None) -> str:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 200_000)
    return f"pbkdf2${salt.hex()}${digest.hex()}"


def check_password(password: str, stored: str | None) -> bool:
    if not stored or not stored.startswith("pbkdf2$"):
        return False
    _, salt, _digest = stored.split("$")
    return secrets.compare_digest(hash_password(password, bytes.fromhex(salt)), stored)


class Store:
    """Thin, typed access to the database; rows come back as dicts."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(SCHEMA)

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

    # ---- users and tokens ---------------------------------------------------------------------------------
    def ensure_user(self, name: str, *, admin: bool = False) -> None:
        with self.tx() as db:
            db.execute("INSERT OR IGNORE INTO users (name, admin, created) VALUES (?, ?, ?)",
                       (name, int(admin), time.time()))
            if admin:
                db.execute("UPDATE users SET admin = 1 WHERE name = ?", (name,))

    def set_password(self, name: str, password: str) -> None:
        with self.tx() as db:
            db.execute("UPDATE users SET password_hash = ? WHERE name = ?", (hash_password(password), name))

    def new_token(self, user: str, label: str = "") -> str:
        token = secrets.token_urlsafe(32)
        with self.tx() as db:
            db.execute("INSERT INTO tokens (hash, user, label, created) VALUES (?, ?, ?, ?)",
                       (hash_token(token), user, label, time.time()))
        return token

    def user_for_token(self, token: str) -> dict[str, Any] | None:
        return self.one("SELECT u.name, u.admin FROM tokens t JOIN users u ON u.name = t.user WHERE t.hash = ?",
                        (hash_token(token),))

    def user(self, name: str) -> dict[str, Any] | None:
        return self.one("SELECT * FROM users WHERE name = ?", (name,))

    def tokens(self, user: str) -> list[dict[str, Any]]:
        """The user's tokens: label, created, the stored hash, and an id to name one by (not the token)."""
        rows = self.all("SELECT hash, label, created FROM tokens WHERE user = ? ORDER BY created", (user,))
        for r in rows:
            r["id"] = f"sha256-{r['hash'][:16]}"
        return rows

    def revoke_token(self, digest: str) -> None:
        self.db.execute("DELETE FROM tokens WHERE hash = ?", (digest,))

    def users(self) -> list[dict[str, Any]]:
        return self.all("SELECT name, admin, created FROM users ORDER BY name")

    def user_names(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT name FROM users").fetchall()}

    # ---- jobs -------------------------------------------------------------------------------------------------
    def job(self, user: str, name: str) -> dict[str, Any] | None:
        """The whole job row with its submitted config text and model."""
        return self.one("SELECT * FROM jobs JOIN job_configs c ON c.job_id = jobs.id WHERE user = ? AND name = ?",
                        (user, name))

    def job_by_id(self, job_id: int) -> dict[str, Any] | None:
        return self.one("SELECT * FROM jobs WHERE id = ?", (job_id,))

    def insert_job(self, user: str, name: str, *, vc: str, now: int, total_gpu: int, total_tasks: int,
                   total_roles: int, config_format: str, config_text: str, model: str) -> int:
        """A new WAITING job and its submitted config (inside the caller's transaction); returns its id.
        Raises ``sqlite3.IntegrityError`` when the user has a job of that name."""
        cur = self.db.execute(
            "INSERT INTO jobs (user, name, debug_id, state, sub_state, vc, submission_time, created_time, "
            "total_gpu, total_tasks, total_roles, config_format) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (user, name, debug_id(user, name), "WAITING", "AttemptCreationPending", vc, now, now, total_gpu,
             total_tasks, total_roles, config_format))
        job_id = cur.lastrowid
        assert job_id is not None  # an INSERT into a rowid table always sets it
        self.db.execute("INSERT INTO job_configs (job_id, config_text, model) VALUES (?,?,?)",
                        (job_id, config_text, model))
        return job_id

    def delete_job(self, job_id: int) -> None:
        """The job and (by cascade) its config, attempts, tasks, events and tags."""
        self.db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    def model_text(self, job_id: int) -> str | None:
        """The job's stored model (JSON), as the daemon parsed it at submission or last changed it."""
        row = self.db.execute("SELECT model FROM job_configs WHERE job_id = ?", (job_id,)).fetchone()
        return row[0] if row else None

    def set_model_text(self, job_id: int, model: str) -> None:
        self.db.execute("UPDATE job_configs SET model = ? WHERE job_id = ?", (model, job_id))

    def overdue_jobs(self, now: float) -> list[dict[str, Any]]:
        """RUNNING jobs whose deadline (seconds since the epoch) is before ``now``."""
        return self.all("SELECT * FROM jobs WHERE deadline IS NOT NULL AND deadline < ? AND state = 'RUNNING'",
                        (now,))

    def jobs_in_state(self, state: str) -> list[dict[str, Any]]:
        return self.all("SELECT * FROM jobs WHERE state = ?", (state,))

    def jobs_in_sub_state(self, sub_state: str) -> list[dict[str, Any]]:
        return self.all("SELECT * FROM jobs WHERE sub_state = ?", (sub_state,))

    def queued_jobs(self) -> list[dict[str, Any]]:
        """Started jobs with a task of their current attempt still WAITING (id, vc, submission_time): the queue
        a restarted daemon rebuilds."""
        return self.all(
            "SELECT DISTINCT j.id, j.vc, j.submission_time FROM jobs j JOIN tasks t ON t.job_id = j.id AND "
            "t.attempt = j.attempt WHERE t.state = 'WAITING' AND j.execution_type = 'START' AND "
            f"j.state IN {_sql_set(LIVE_JOB)}")

    def update_job(self, job_id: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE jobs SET {cols} WHERE id = ?", (*fields.values(), job_id))

    def job_core(self, job_id: int) -> dict[str, Any] | None:
        """A job row without its (large) config text and model."""
        return self.one(f"SELECT {CORE_COLUMNS} FROM jobs WHERE id = ?", (job_id,))

    def list_item(self, job_id: int) -> dict[str, Any]:
        return json.loads(self.db.execute(f"SELECT {ITEM} FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])

    def add_tag(self, job_id: int, tag: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO job_tags (job_id, tag) VALUES (?, ?)", (job_id, tag))

    def delete_tag(self, job_id: int, tag: str) -> bool:
        return self.db.execute("DELETE FROM job_tags WHERE job_id = ? AND tag = ?", (job_id, tag)).rowcount > 0

    def list_json(self, *, users: list[str] | None = None, states: list[str] | None = None,
                  vcs: list[str] | None = None, keyword: str | None = None, order: str = "submissionTime,DESC",
                  offset: int = 0, limit: int = 5000, with_total: bool = False) -> tuple[str, int | None]:
        """The JSON array of list items (and the total count when asked), filtered, ordered and paged."""
        where, args = [], []
        for col, values in (("user", users), ("state", states), ("vc", vcs)):
            if values:
                where.append(f"{col} IN ({','.join('?' * len(values))})")
                args += values
        if keyword:
            where.append("(instr(name, ?) > 0 OR instr(user, ?) > 0 OR instr(vc, ?) > 0)")
            args += [keyword] * 3
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        field, _, direction = order.partition(",")
        col = LIST_ORDER_FIELDS.get(field, "submission_time")
        direction = "ASC" if direction.strip().upper() == "ASC" else "DESC"
        tagged = self.db.execute("SELECT 1 FROM job_tags LIMIT 1").fetchone() is not None  # else: no tag to add
        rows = self.db.execute(f"SELECT {ITEM if tagged else 'item'} FROM jobs{clause} ORDER BY {col} {direction}, "
                               f"id {direction} LIMIT ? OFFSET ?", (*args, limit, offset)).fetchall()
        total = self.db.execute(f"SELECT count(*) FROM jobs{clause}", args).fetchone()[0] if with_total else None
        return "[" + ",".join(r[0] for r in rows) + "]", total

    # ---- tasks, attempts, events ---------------------------------------------------------------------------------
    def tasks(self, job_id: int, attempt: int | None = None) -> list[dict[str, Any]]:
        if attempt is None:
            return self.all("SELECT * FROM tasks WHERE job_id = ? ORDER BY attempt, rowid", (job_id,))
        return self.all("SELECT * FROM tasks WHERE job_id = ? AND attempt = ? ORDER BY rowid", (job_id, attempt))

    def task(self, job_id: int, attempt: int, role: str, idx: int) -> dict[str, Any] | None:
        return self.one("SELECT * FROM tasks WHERE job_id = ? AND attempt = ? AND role = ? AND idx = ?",
                        (job_id, attempt, role, idx))

    def live_tasks(self) -> list[dict[str, Any]]:
        """Tasks that hold resources (STARTING, RUNNING) or ports, each with its job's ``vc``: what a restarted
        daemon re-attaches to and accounts for."""
        return self.all("SELECT t.*, j.vc FROM tasks t JOIN jobs j ON j.id = t.job_id "
                        f"WHERE t.state IN {_sql_set(ACTIVE_TASK)} OR t.ports IS NOT NULL")

    def waiting_tasks(self, job_id: int, attempt: int) -> list[dict[str, Any]]:
        return self.all("SELECT * FROM tasks WHERE job_id = ? AND attempt = ? AND state = 'WAITING' ORDER BY rowid",
                        (job_id, attempt))

    def update_task(self, task: dict[str, Any], **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE tasks SET {cols} WHERE job_id = ? AND attempt = ? AND role = ? AND idx = ?",
                        (*fields.values(), task["job_id"], task["attempt"], task["role"], task["idx"]))
        task.update(fields)

    def add_event(self, job_id: int, type_: str, reason: str, message: str, role: str | None = None,
                  idx: int | None = None) -> None:
        self.db.execute("INSERT INTO events (job_id, time, type, reason, message, role, idx) VALUES (?,?,?,?,?,?,?)",
                        (job_id, now_ms(), type_, reason, message, role, idx))

    def events(self, job_id: int, type_: str | None = None) -> list[dict[str, Any]]:
        if type_:
            return self.all("SELECT * FROM events WHERE job_id = ? AND type = ? ORDER BY id", (job_id, type_))
        return self.all("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,))

    def insert_attempt(self, job_id: int, attempt: int, tasks: list[tuple[str, int, int, int, int]]) -> None:
        """A new WAITING attempt and its WAITING tasks, each ``(role, idx, cpu, memory_mb, gpu)`` (inside the
        caller's transaction)."""
        self.db.execute("INSERT INTO attempts (job_id, attempt, state, created_time) VALUES (?,?,?,?)",
                        (job_id, attempt, "WAITING", now_ms()))
        self.db.executemany(
            "INSERT INTO tasks (job_id, attempt, role, idx, state, cpu, memory_mb, gpu, created_time) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            [(job_id, attempt, role, idx, "WAITING", cpu, memory_mb, gpu, now_ms())
             for role, idx, cpu, memory_mb, gpu in tasks])

    def update_attempt(self, job_id: int, attempt: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE attempts SET {cols} WHERE job_id = ? AND attempt = ?", (*fields.values(), job_id,
                                                                                          attempt))

    def attempts(self, job_id: int) -> list[dict[str, Any]]:
        return self.all("SELECT * FROM attempts WHERE job_id = ? ORDER BY attempt DESC", (job_id,))

    def attempt(self, job_id: int, attempt: int) -> dict[str, Any] | None:
        return self.one("SELECT * FROM attempts WHERE job_id = ? AND attempt = ?", (job_id, attempt))


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def loads(text: str | None, default: Any = None) -> Any:
    return json.loads(text) if text else default
