"""Job and task states, once: OpenPAI's names (str enums, so a state compares equal to its wire string and a row's
plain string is found in a group), and the groups the code asks about."""

from __future__ import annotations

from enum import Enum


class _State(str, Enum):
    """``enum.StrEnum`` for Python 3.10: ``str(state)`` and f-strings give the bare name, as on the wire."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class JobState(_State):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"


class TaskState(_State):
    WAITING = "WAITING"
    STARTING = "STARTING"  # the local daemon's own: shown as WAITING on the wire (OpenPAI has none)
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"


FINAL: frozenset[str] = frozenset(s.value for s in (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED))
"""A job or task in one of these has ended and never changes again (within its attempt). The groups hold plain
strings, so they print and serialise as on the wire."""

ACTIVE_TASK: frozenset[str] = frozenset(s.value for s in (TaskState.STARTING, TaskState.RUNNING))
"""A task in one of these holds resources and has (or is getting) a process or container."""

LIVE_JOB: frozenset[str] = frozenset(s.value for s in (JobState.WAITING, JobState.RUNNING))
"""A started job that has not been asked to stop and has not ended."""

JOB_STATES: tuple[str, ...] = tuple(s.value for s in JobState)
"""Every job state, in the order a job goes through them."""


def is_final(state: str | None) -> bool:
    return state in FINAL
