"""The rows the store hands out, typed: each TypedDict lists the columns of its query (schema.py) with their SQL
types in Python (``int | None`` for a nullable INTEGER, ``float`` for REAL, ...), so mypy checks every
``row["key"]``. A row is a plain dict: a caller may keep its copy current in place (``Store.set_job``,
``Store.update_task``)."""

from __future__ import annotations

from typing import TypedDict


class JobCore(TypedDict):
    """A job row without its list item, config and model: ``CORE_COLUMNS`` (``Store.job_core``)."""

    id: int
    user: str
    name: str
    debug_id: str
    state: str
    sub_state: str
    execution_type: str
    vc: str
    attempt: int
    retries: int
    submission_time: int
    created_time: int | None
    launched_time: int | None
    completed_time: int | None
    exit_code: int | None
    exit_diagnostics: str | None
    exit_type: str | None
    trigger_role: str | None
    trigger_index: int | None
    total_gpu: int
    total_tasks: int
    total_roles: int
    config_format: str
    waiting_reason: str | None
    deadline: float | None
    priority: str | None  # its priority class (None: OpenPAI's "default")


class JobRow(JobCore):
    """``SELECT * FROM jobs``: the core columns and the generated list item (JSON)."""

    item: str


class JobWithConfig(JobRow):
    """A job row joined with its submitted config (``Store.job``): what the REST handlers look up."""

    job_id: int
    config_text: str
    model: str


class QueuedJob(TypedDict):
    """A started job with waiting tasks (``Store.queued_jobs``): its place in the queue."""

    id: int
    vc: str
    submission_time: int


class AttemptRow(TypedDict):
    """``SELECT * FROM attempts``."""

    job_id: int
    attempt: int
    state: str
    created_time: int | None
    launched_time: int | None
    completed_time: int | None
    exit_code: int | None
    exit_diagnostics: str | None
    trigger_role: str | None
    trigger_index: int | None


class TaskRow(TypedDict):
    """``SELECT * FROM tasks``; ``ports``, ``gpus``, ``handle`` and ``services`` are JSON text."""

    job_id: int
    attempt: int
    role: str
    idx: int
    task_attempt: int
    state: str
    runtime: str | None
    handle: str | None
    host_ip: str | None
    ports: str | None
    gpus: str | None
    cpu: int
    memory_mb: int
    gpu: int
    exit_code: int | None
    exit_diagnostics: str | None
    created_time: int | None
    launched_time: int | None
    completed_time: int | None
    task_dir: str | None
    stopping: int
    services: str | None


class LiveTask(TaskRow):
    """A task that holds resources or ports, with its job's virtual cluster (``Store.live_tasks``)."""

    vc: str


class EventRow(TypedDict):
    """``SELECT * FROM events``."""

    id: int
    job_id: int
    time: int
    type: str
    reason: str
    message: str
    role: str | None
    idx: int | None


class UserSummary(TypedDict):
    """A user without the password hash (``Store.users``)."""

    name: str
    admin: int
    created: float


class UserRow(UserSummary):
    """``SELECT * FROM users``."""

    password_hash: str | None


class TokenUser(TypedDict):
    """Who a token belongs to (``Store.user_for_token``): the viewer of a REST request."""

    name: str
    admin: int


class TokenRow(TypedDict):
    """A user's token as listed (``Store.tokens``): the stored hash and an id derived from it, never the token."""

    hash: str
    label: str | None
    created: float
    id: str
