"""SQLite state of the embedded cluster (WAL): users and tokens, jobs, attempts, tasks, events. All of the
daemon's SQL is here.

Only the daemon opens this database. Every write that changes a job happens in one transaction, so a
daemon killed at any moment leaves a consistent state to recover from.
"""

from .db import debug_id, dumps, loads, now_ms
from .jobs import Store
from .rows import (
    AttemptRow,
    EventRow,
    JobCore,
    JobRow,
    JobWithConfig,
    LiveTask,
    QueuedJob,
    TaskRow,
    TokenRow,
    TokenUser,
    UserRow,
    UserSummary,
)
from .users import APPLICATION, OWNER, check_password, hash_password, hash_token

__all__ = [
    "APPLICATION",
    "OWNER",
    "AttemptRow",
    "EventRow",
    "JobCore",
    "JobRow",
    "JobWithConfig",
    "LiveTask",
    "QueuedJob",
    "Store",
    "TaskRow",
    "TokenRow",
    "TokenUser",
    "UserRow",
    "UserSummary",
    "check_password",
    "debug_id",
    "dumps",
    "hash_password",
    "hash_token",
    "loads",
    "now_ms",
]
