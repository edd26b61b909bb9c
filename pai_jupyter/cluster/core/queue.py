"""The waiting queue: per virtual cluster, job ids in FIFO order of submission time.

Kept in memory (rebuilt from the database at start) so that scheduling looks only at the head of each
queue, not at every waiting job, and a job's place in line is found by bisection.
"""

from __future__ import annotations

import bisect


class JobQueue:
    def __init__(self) -> None:
        self.by_vc: dict[str, list[tuple[int, int]]] = {}

    def add(self, vc: str, submission_time: int, job_id: int) -> None:
        entries = self.by_vc.setdefault(vc, [])
        key = (submission_time, job_id)
        i = bisect.bisect_left(entries, key)
        if i == len(entries) or entries[i] != key:
            entries.insert(i, key)

    def discard(self, vc: str, submission_time: int, job_id: int) -> None:
        entries = self.by_vc.get(vc, [])
        i = bisect.bisect_left(entries, (submission_time, job_id))
        if i < len(entries) and entries[i] == (submission_time, job_id):
            del entries[i]

    def position(self, vc: str, submission_time: int, job_id: int) -> int | None:
        """How many jobs are ahead of this one, or None when it is not queued."""
        entries = self.by_vc.get(vc, [])
        i = bisect.bisect_left(entries, (submission_time, job_id))
        return i if i < len(entries) and entries[i] == (submission_time, job_id) else None

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_vc.values())
