"""The waiting queue in-process: FIFO by (submission time, id) per virtual cluster, idempotent adds, discards
and a job's place in line."""

from __future__ import annotations

import random

from pai_jupyter.cluster.core.queue import JobQueue


def test_entries_are_ordered_by_submission_time_then_id_whatever_the_order_of_adds() -> None:
    q = JobQueue()
    entries = [(100, 3), (100, 1), (50, 9), (200, 2), (100, 2)]
    for t, job_id in random.Random(7).sample(entries, len(entries)):
        q.add("default", t, job_id)
    assert q.by_vc["default"] == sorted(entries)
    assert [q.position("default", t, i) for t, i in sorted(entries)] == [0, 1, 2, 3, 4]


def test_adding_a_queued_job_again_keeps_one_entry() -> None:
    q = JobQueue()
    q.add("default", 10, 1)
    q.add("default", 10, 1)  # a task retry re-queues a job that may still be queued
    assert q.by_vc["default"] == [(10, 1)] and len(q) == 1


def test_virtual_clusters_have_separate_lines() -> None:
    q = JobQueue()
    q.add("a", 30, 1)
    q.add("b", 10, 2)
    q.add("a", 20, 3)
    assert q.position("a", 20, 3) == 0 and q.position("a", 30, 1) == 1
    assert q.position("b", 10, 2) == 0
    assert q.position("c", 10, 2) is None and len(q) == 3


def test_discard_removes_only_that_entry_and_position_of_an_unqueued_job_is_none() -> None:
    q = JobQueue()
    for i in range(5):
        q.add("default", 100 + i, i)
    q.discard("default", 102, 2)
    q.discard("default", 102, 2)  # twice is harmless
    q.discard("default", 103, 99)  # a wrong id at a queued time removes nothing
    q.discard("nope", 1, 1)
    assert q.by_vc["default"] == [(100, 0), (101, 1), (103, 3), (104, 4)]
    assert q.position("default", 102, 2) is None
    assert q.position("default", 104, 4) == 3
    assert q.position("default", 999, 4) is None  # the id alone does not find it


def test_many_jobs_keep_their_order_and_count() -> None:
    q = JobQueue()
    rng = random.Random(11)
    jobs = [(rng.randrange(1000), i) for i in range(2000)]
    for t, i in jobs:
        q.add("vc", t, i)
    for t, i in jobs[::3]:
        q.discard("vc", t, i)
    left = sorted(set(jobs) - set(jobs[::3]))
    assert q.by_vc["vc"] == left and len(q) == len(left)
    assert all(q.position("vc", t, i) == n for n, (t, i) in enumerate(left))
