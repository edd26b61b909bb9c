"""Jobs, their attempts, tasks and events: every statement the cluster runs on them, each a named method."""

from __future__ import annotations

import json
from typing import Any, cast

from ....common.states import ACTIVE_TASK, LIVE_JOB
from .db import debug_id, now_ms
from .rows import AttemptRow, EventRow, JobCore, JobRow, JobWithConfig, LiveTask, QueuedJob, TaskRow
from .schema import CORE_COLUMNS, ITEM, LIST_ORDER_FIELDS, PRIORITY, sql_set
from .users import Users

CHUNK = 400  # jobs named in one statement (SQLite allows 32766 bound values; a few statements are as quick)


class Store(Users):
    """Thin, typed access to the database; rows come back as dicts. Only the daemon opens it."""

    # ---- jobs -------------------------------------------------------------------------------------------------
    def job(self, user: str, name: str) -> JobWithConfig | None:
        """The whole job row with its submitted config text and model."""
        return cast(
            "JobWithConfig | None",
            self.one(
                "SELECT * FROM jobs JOIN job_configs c ON c.job_id = jobs.id WHERE user = ? AND name = ?", (user, name)
            ),
        )

    def job_by_id(self, job_id: int) -> JobRow | None:
        return cast("JobRow | None", self.one("SELECT * FROM jobs WHERE id = ?", (job_id,)))

    def insert_job(
        self,
        user: str,
        name: str,
        *,
        vc: str,
        now: int,
        total_gpu: int,
        total_tasks: int,
        total_roles: int,
        config_format: str,
        config_text: str,
        model: str,
    ) -> int:
        """A new WAITING job and its submitted config (inside the caller's transaction); returns its id.
        Raises ``sqlite3.IntegrityError`` when the user has a job of that name."""
        cur = self.db.execute(
            "INSERT INTO jobs (user, name, debug_id, state, sub_state, vc, submission_time, created_time, "
            "total_gpu, total_tasks, total_roles, config_format) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                user,
                name,
                debug_id(user, name),
                "WAITING",
                "AttemptCreationPending",
                vc,
                now,
                now,
                total_gpu,
                total_tasks,
                total_roles,
                config_format,
            ),
        )
        job_id = cur.lastrowid
        assert job_id is not None  # an INSERT into a rowid table always sets it
        self.db.execute(
            "INSERT INTO job_configs (job_id, config_text, model) VALUES (?,?,?)", (job_id, config_text, model)
        )
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

    def overdue_jobs(self, now: float) -> list[JobRow]:
        """RUNNING jobs whose deadline (seconds since the epoch) is before ``now``."""
        return cast(
            "list[JobRow]",
            self.all("SELECT * FROM jobs WHERE deadline IS NOT NULL AND deadline < ? AND state = 'RUNNING'", (now,)),
        )

    def jobs_in_state(self, state: str) -> list[JobRow]:
        return cast("list[JobRow]", self.all("SELECT * FROM jobs WHERE state = ?", (state,)))

    def jobs_in_sub_state(self, sub_state: str) -> list[JobRow]:
        return cast("list[JobRow]", self.all("SELECT * FROM jobs WHERE sub_state = ?", (sub_state,)))

    def queued_jobs(self) -> list[QueuedJob]:
        """Started jobs with a task of their current attempt still WAITING (id, vc, submission_time): the queue
        a restarted daemon rebuilds."""
        return cast(
            "list[QueuedJob]",
            self.all(
                "SELECT DISTINCT j.id, j.vc, j.submission_time FROM jobs j JOIN tasks t ON t.job_id = j.id AND "
                "t.attempt = j.attempt WHERE t.state = 'WAITING' AND j.execution_type = 'START' AND "
                f"j.state IN {sql_set(LIVE_JOB)}"
            ),
        )

    def update_job(self, job_id: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE jobs SET {cols} WHERE id = ?", (*fields.values(), job_id))

    def set_job(self, row: JobCore, **fields: Any) -> None:
        """Write ``fields`` to the job's row and to the caller's copy ``row`` (kept current in place)."""
        self.update_job(row["id"], **fields)
        cast("dict[str, Any]", row).update(fields)

    def job_core(self, job_id: int) -> JobCore | None:
        """A job row without its (large) config text and model."""
        return cast("JobCore | None", self.one(f"SELECT {CORE_COLUMNS} FROM jobs WHERE id = ?", (job_id,)))

    def list_item(self, job_id: int) -> dict[str, Any]:
        item: dict[str, Any] = json.loads(
            self.db.execute(f"SELECT {ITEM} FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
        )
        return item

    def add_tag(self, job_id: int, tag: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO job_tags (job_id, tag) VALUES (?, ?)", (job_id, tag))

    def delete_tag(self, job_id: int, tag: str) -> bool:
        return self.db.execute("DELETE FROM job_tags WHERE job_id = ? AND tag = ?", (job_id, tag)).rowcount > 0

    def priorities(self) -> dict[int, tuple[str | None, float | None]]:
        """Every job's priority class and queue key that has either (see ``schema.PRIORITY``)."""
        rows = self.db.execute(
            "SELECT id, priority, queue_key FROM jobs LEFT JOIN job_priority p ON p.job_id = jobs.id "
            "WHERE priority IS NOT NULL OR queue_key IS NOT NULL"
        ).fetchall()
        return {r[0]: (r[1], r[2]) for r in rows}

    def set_priority(self, job_id: int, priority: str | None, queue_key: float | None) -> None:
        """A job's priority class (None: OpenPAI's "default") and place in its class's line (None: its
        submission time)."""
        self.db.execute("UPDATE jobs SET priority = ? WHERE id = ? AND priority IS NOT ?", (priority, job_id, priority))
        self.db.execute(
            "INSERT INTO job_priority (job_id, queue_key) VALUES (?, ?) ON CONFLICT (job_id) DO "
            "UPDATE SET queue_key = excluded.queue_key",
            (job_id, queue_key),
        )

    def list_json(
        self,
        *,
        users: list[str] | None = None,
        states: list[str] | None = None,
        vcs: list[str] | None = None,
        keyword: str | None = None,
        tags_contain: list[str] | None = None,
        tags_not_contain: list[str] | None = None,
        priorities: list[str] | None = None,
        order: str = "submissionTime,DESC",
        offset: int = 0,
        limit: int = 5000,
        with_total: bool = False,
    ) -> tuple[str, int | None]:
        """The JSON array of list items (and the total count when asked), filtered, ordered and paged as
        OpenPAI's ``controllers/v2/job.js`` list does: a job with any of ``tags_contain`` and none of
        ``tags_not_contain``; ``priorities`` names priority classes, "default" the jobs without one; ``order`` is
        ``field,ASC|DESC`` of its fields, anything else the newest first; NULLs sort last ASC, first DESC (as
        its PostgreSQL does)."""
        where, args = [], []
        for col, values in (("user", users), ("state", states), ("vc", vcs)):
            if values:
                where.append(f"{col} IN ({','.join('?' * len(values))})")
                args += values
        if keyword:
            where.append("(instr(name, ?) > 0 OR instr(user, ?) > 0 OR instr(vc, ?) > 0)")
            args += [keyword] * 3
        for negate, tags in (("", tags_contain), ("NOT ", tags_not_contain)):
            if tags:
                where.append(
                    f"{negate}EXISTS (SELECT 1 FROM job_tags g WHERE g.job_id = jobs.id AND g.tag IN "
                    f"({','.join('?' * len(tags))}))"
                )
                args += tags
        if priorities:
            named = [p for p in priorities if p != "default"]
            either = [f"{PRIORITY} IN ({','.join('?' * len(named))})"] if named else []
            either += [f"{PRIORITY} IS NULL"] if "default" in priorities else []
            where.append(f"({' OR '.join(either)})")
            args += named
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        field, _, direction = order.partition(",")
        if field not in LIST_ORDER_FIELDS or direction not in ("ASC", "DESC"):
            field, direction = "submissionTime", "DESC"
        col = LIST_ORDER_FIELDS[field]
        nulls = "NULLS LAST" if direction == "ASC" else "NULLS FIRST"
        tagged = self.db.execute("SELECT 1 FROM job_tags LIMIT 1").fetchone()  # else: the stored item is the answer
        rows = self.db.execute(
            f"SELECT {ITEM if tagged else 'item'} FROM jobs{clause} ORDER BY {col} {direction} {nulls}, "
            f"id {direction} LIMIT ? OFFSET ?",
            (*args, limit, offset),
        ).fetchall()
        total = self.db.execute(f"SELECT count(*) FROM jobs{clause}", args).fetchone()[0] if with_total else None
        return "[" + ",".join(r[0] for r in rows) + "]", total

    # ---- tasks, attempts, events ---------------------------------------------------------------------------------
    def tasks(self, job_id: int, attempt: int | None = None) -> list[TaskRow]:
        if attempt is None:
            rows = self.all("SELECT * FROM tasks WHERE job_id = ? ORDER BY attempt, rowid", (job_id,))
        else:
            rows = self.all("SELECT * FROM tasks WHERE job_id = ? AND attempt = ? ORDER BY rowid", (job_id, attempt))
        return cast("list[TaskRow]", rows)

    def job_cores(self, names: list[tuple[str, str]]) -> list[JobCore]:
        """The core rows of the jobs named ``(user, name)`` (those that exist), a few statements for many jobs."""
        out: list[JobCore] = []
        for i in range(0, len(names), CHUNK):
            part = names[i : i + CHUNK]
            pairs = ",".join("(?, ?)" for _ in part)
            args = tuple(v for pair in part for v in pair)
            out += cast(
                "list[JobCore]",
                self.all(f"SELECT {CORE_COLUMNS} FROM jobs WHERE (user, name) IN (VALUES {pairs})", args),
            )
        return out

    def current_tasks(self, job_ids: list[int]) -> dict[int, list[TaskRow]]:
        """Each job's tasks of its current attempt in creation order (as ``tasks(id, attempt)``), for many jobs at
        once: the local job list's tasks."""
        out: dict[int, list[TaskRow]] = {i: [] for i in job_ids}
        for i in range(0, len(job_ids), CHUNK):
            part = job_ids[i : i + CHUNK]
            rows = self.all(
                "SELECT t.* FROM tasks t JOIN jobs j ON j.id = t.job_id AND t.attempt = j.attempt "
                f"WHERE j.id IN ({','.join('?' * len(part))}) ORDER BY t.rowid",
                tuple(part),
            )
            for row in cast("list[TaskRow]", rows):
                out[row["job_id"]].append(row)
        return out

    def task(self, job_id: int, attempt: int, role: str, idx: int) -> TaskRow | None:
        return cast(
            "TaskRow | None",
            self.one(
                "SELECT * FROM tasks WHERE job_id = ? AND attempt = ? AND role = ? AND idx = ?",
                (job_id, attempt, role, idx),
            ),
        )

    def live_tasks(self) -> list[LiveTask]:
        """Tasks that hold resources (STARTING, RUNNING) or ports, each with its job's ``vc``: what a restarted
        daemon re-attaches to and accounts for."""
        return cast(
            "list[LiveTask]",
            self.all(
                "SELECT t.*, j.vc FROM tasks t JOIN jobs j ON j.id = t.job_id "
                f"WHERE t.state IN {sql_set(ACTIVE_TASK)} OR t.ports IS NOT NULL"
            ),
        )

    def watched_tasks(self) -> list[TaskRow]:
        """Active tasks the runtime has a handle for: each one should have a watcher (``recovery.watch_lost``)."""
        return cast(
            "list[TaskRow]",
            self.all(f"SELECT * FROM tasks WHERE state IN {sql_set(ACTIVE_TASK)} AND handle IS NOT NULL"),
        )

    def busy_tasks(self) -> list[dict[str, Any]]:
        """What holds resources now: each active task's cpu, memory_mb and gpu, its job's vc and deadline."""
        return self.all(
            "SELECT t.cpu, t.memory_mb, t.gpu, j.vc, j.deadline FROM tasks t JOIN jobs j ON j.id = t.job_id "
            f"WHERE t.state IN {sql_set(ACTIVE_TASK)}"
        )

    def waiting_tasks(self, job_id: int, attempt: int) -> list[TaskRow]:
        return cast(
            "list[TaskRow]",
            self.all(
                "SELECT * FROM tasks WHERE job_id = ? AND attempt = ? AND state = 'WAITING' ORDER BY rowid",
                (job_id, attempt),
            ),
        )

    def update_task(self, task: TaskRow, **fields: Any) -> None:
        """Write ``fields`` to the task's row and to the caller's copy ``task`` (kept current in place)."""
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(
            f"UPDATE tasks SET {cols} WHERE job_id = ? AND attempt = ? AND role = ? AND idx = ?",
            (*fields.values(), task["job_id"], task["attempt"], task["role"], task["idx"]),
        )
        cast("dict[str, Any]", task).update(fields)

    def add_event(
        self, job_id: int, type_: str, reason: str, message: str, role: str | None = None, idx: int | None = None
    ) -> None:
        self.db.execute(
            "INSERT INTO events (job_id, time, type, reason, message, role, idx) VALUES (?,?,?,?,?,?,?)",
            (job_id, now_ms(), type_, reason, message, role, idx),
        )

    def events(self, job_id: int, type_: str | None = None) -> list[EventRow]:
        if type_:
            rows = self.all("SELECT * FROM events WHERE job_id = ? AND type = ? ORDER BY id", (job_id, type_))
        else:
            rows = self.all("SELECT * FROM events WHERE job_id = ? ORDER BY id", (job_id,))
        return cast("list[EventRow]", rows)

    def insert_attempt(self, job_id: int, attempt: int, tasks: list[tuple[str, int, int, int, int]]) -> None:
        """A new WAITING attempt and its WAITING tasks, each ``(role, idx, cpu, memory_mb, gpu)`` (inside the
        caller's transaction)."""
        self.db.execute(
            "INSERT INTO attempts (job_id, attempt, state, created_time) VALUES (?,?,?,?)",
            (job_id, attempt, "WAITING", now_ms()),
        )
        self.db.executemany(
            "INSERT INTO tasks (job_id, attempt, role, idx, state, cpu, memory_mb, gpu, created_time) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            [
                (job_id, attempt, role, idx, "WAITING", cpu, memory_mb, gpu, now_ms())
                for role, idx, cpu, memory_mb, gpu in tasks
            ],
        )

    def update_attempt(self, job_id: int, attempt: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(
            f"UPDATE attempts SET {cols} WHERE job_id = ? AND attempt = ?", (*fields.values(), job_id, attempt)
        )

    def attempts(self, job_id: int) -> list[AttemptRow]:
        return cast(
            "list[AttemptRow]", self.all("SELECT * FROM attempts WHERE job_id = ? ORDER BY attempt DESC", (job_id,))
        )

    def attempt(self, job_id: int, attempt: int) -> AttemptRow | None:
        return cast(
            "AttemptRow | None", self.one("SELECT * FROM attempts WHERE job_id = ? AND attempt = ?", (job_id, attempt))
        )
