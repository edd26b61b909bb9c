"""The waiting queue in-process: by priority class, then queue key (an admin's) or submission time, then id, per
virtual cluster; idempotent adds, removals, moves and a job's place in line."""

from __future__ import annotations

import random

from pai_jupyter.cluster.core.queue import JobQueue


def test_entries_are_ordered_by_submission_time_then_id_whatever_the_order_of_adds() -> None:
    q = JobQueue()
    entries = [(100, 3), (100, 1), (50, 9), (200, 2), (100, 4)]
    for t, job_id in random.Random(7).sample(entries, len(entries)):
        q.add("default", t, job_id)
    assert q.ids("default") == [i for _, i in sorted(entries)]
    assert [q.position("default", t, i) for t, i in sorted(entries)] == [0, 1, 2, 3, 4]


def test_adding_a_queued_job_again_keeps_one_entry() -> None:
    q = JobQueue()
    q.add("default", 10, 1)
    q.add("default", 10, 1)  # a task retry re-queues a job that may still be queued
    assert q.ids("default") == [1] and len(q) == 1


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
    q.remove(99)
    assert q.ids("default") == [0, 1, 3, 4]
    assert q.position("default", 102, 2) is None
    assert q.position("default", 104, 4) == 3


def test_priority_classes_come_first_then_an_admins_place_then_submission() -> None:
    q = JobQueue()
    for i in range(6):
        q.add("default", 100 + i, i)
    q.set_order(4, "prod", None, 104)  # HiveD's classes: crit > prod > test (= none) > oppo
    q.set_order(0, "oppo", None, 100)
    q.set_order(5, "crit", None, 105)
    assert q.ids("default") == [5, 4, 1, 2, 3, 0]
    q.set_order(3, None, 50.0, 103)  # moved ahead of 1 and 2 (same class)
    assert q.ids("default") == [5, 4, 3, 1, 2, 0]
    q.set_order(3, None, None, 103)  # back to its submission time
    assert q.ids("default") == [5, 4, 1, 2, 3, 0]
    q.set_order(7, "prod", None, 107)  # not queued yet: it takes its place when it is
    q.add("default", 107, 7)
    assert q.ids("default") == [5, 4, 7, 1, 2, 3, 0] and len(q) == 7


def test_many_jobs_keep_their_order_and_count() -> None:
    q = JobQueue()
    rng = random.Random(11)
    jobs = [(rng.randrange(1000), i) for i in range(2000)]
    for t, i in jobs:
        q.add("vc", t, i)
    for t, i in jobs[::3]:
        q.discard("vc", t, i)
    left = sorted(set(jobs) - set(jobs[::3]))
    assert q.ids("vc") == [i for _, i in left] and len(q) == len(left)
    assert all(q.position("vc", t, i) == n for n, (t, i) in enumerate(left))
