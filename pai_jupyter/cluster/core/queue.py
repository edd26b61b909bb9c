"""The waiting queue: per virtual cluster, job ids in order of priority class, then of the place an admin gave
the job (its queue key), else of submission time.

Kept in memory (rebuilt from the database at start), with what the scheduler needs of each job (``info``, filled
and dropped by ``Launcher.schedule``), so that a scheduling pass over thousands of waiting jobs reads none of
them from the database; a job's place in line is found by bisection.
"""

from __future__ import annotations

import bisect
from typing import Any

# OpenPAI/HiveD's priority classes (extras.hivedScheduler.jobPriorityClass) and their priorities
# (rest-server middlewares/v2/hived.js convertPriority); a job without one counts as "test", as there
PRIORITY_CLASSES = {"crit": 120, "prod": 100, "test": 10, "oppo": -1}
DEFAULT_PRIORITY = PRIORITY_CLASSES["test"]

Entry = tuple[int, float, int]  # (-priority, queue key, job id)


class JobQueue:
    def __init__(self) -> None:
        self.by_vc: dict[str, list[Entry]] = {}
        self.where: dict[int, tuple[str, Entry]] = {}
        self.order: dict[int, tuple[str | None, float | None]] = {}  # job id -> (priority class, queue key)
        self.info: dict[int, Any] = {}  # job id -> the scheduler's view of it (backfill.Waiting)
        # job id -> when the last plan reserved its start (a waiting head's shadow time, epoch seconds): an estimate
        self.reserved: dict[int, float] = {}
        self.held: dict[int, str] = {}  # job id -> why the last plan left it out: its user's quota (core/shares.py)
        # fair share (core/shares.py): vc -> job id -> its place in the last plan's line, where fair share reordered
        # it; and each user's decayed usage that order came from (machine-seconds)
        self.fair: dict[str, dict[int, int]] = {}
        self.usage: dict[str, float] = {}

    def entry(self, submission_time: float, job_id: int) -> Entry:
        priority, key = self.order.get(job_id, (None, None))
        rank = PRIORITY_CLASSES.get(priority or "", DEFAULT_PRIORITY)
        return (-rank, submission_time if key is None else key, job_id)

    def add(self, vc: str, submission_time: float, job_id: int) -> None:
        """Queue the job (again: a retry re-queues a job that may still be queued; what it waits for is read
        afresh)."""
        self.info.pop(job_id, None)
        entry = self.entry(submission_time, job_id)
        if job_id in self.where:
            if self.where[job_id] == (vc, entry):
                return
            self.remove(job_id)
        entries = self.by_vc.setdefault(vc, [])
        entries.insert(bisect.bisect_left(entries, entry), entry)
        self.where[job_id] = (vc, entry)

    def remove(self, job_id: int) -> None:
        self.info.pop(job_id, None)
        found = self.where.pop(job_id, None)
        if found is None:
            return
        vc, entry = found
        entries = self.by_vc[vc]
        i = bisect.bisect_left(entries, entry)
        if i < len(entries) and entries[i] == entry:
            del entries[i]

    def discard(self, vc: str, submission_time: float, job_id: int) -> None:
        self.remove(job_id)

    def set_order(self, job_id: int, priority: str | None, key: float | None, submission_time: float) -> None:
        """A job's priority class and queue key (None: its submission time); a queued job moves to its place."""
        if (priority, key) == (None, None):
            self.order.pop(job_id, None)
        else:
            self.order[job_id] = (priority, key)
        if job_id in self.where:
            vc = self.where[job_id][0]
            self.remove(job_id)
            self.add(vc, submission_time, job_id)

    def ids(self, vc: str) -> list[int]:
        return [e[2] for e in self.by_vc.get(vc, [])]

    def line(self, vc: str) -> list[int]:
        """The job ids in the order the last plan weighed them: fair share's where it reordered the line."""
        fair = self.fair.get(vc)
        if not fair:
            return self.ids(vc)
        return sorted(fair, key=fair.__getitem__) + [j for j in self.ids(vc) if j not in fair]

    def position(self, vc: str, submission_time: float, job_id: int) -> int | None:
        """How many jobs are ahead of this one, or None when it is not queued."""
        found = self.where.get(job_id)
        if found is None or found[0] != vc:
            return None
        fair = self.fair.get(vc)
        if fair is not None and job_id in fair:
            return fair[job_id]
        return bisect.bisect_left(self.by_vc[vc], found[1])

    def __len__(self) -> int:
        return len(self.where)
