"""Usage per (user, virtual cluster) from the task and attempt rows (core/store/usage.py): each run's part inside the
window, running ones to now, ended ones without an end left out, waits from each attempt's queueing; fast on many
tasks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster.core.store import Store
from pai_jupyter.cluster.core.store.usage import task_intervals, usage, vc_totals

H = 3_600_000  # an hour in ms
NOW = 1_000 * H


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state.db")
    yield s
    s.close()


def job(store: Store, user: str, name: str, vc: str = "default", submitted: int = 0) -> int:
    cur = store.db.execute(
        "INSERT INTO jobs (user, name, debug_id, state, sub_state, vc, submission_time, total_gpu, total_tasks, "
        "total_roles, config_format) VALUES (?,?,?,?,?,?,?,0,1,1,'v2')",
        (user, name, name, "RUNNING", "AttemptRunning", vc, submitted),
    )
    assert cur.lastrowid is not None
    return cur.lastrowid


def attempt(store: Store, job_id: int, n: int, created: int | None, launched: int | None) -> None:
    store.db.execute(
        "INSERT INTO attempts (job_id, attempt, state, created_time, launched_time) VALUES (?,?,?,?,?)",
        (job_id, n, "RUNNING", created, launched),
    )


def task(
    store: Store,
    job_id: int,
    start: int | None,
    end: int | None,
    gpu: int = 0,
    cpu: int = 1,
    memory_mb: int = 1024,
    idx: int = 0,
    attempt_: int = 0,
    state: str | None = None,
) -> None:
    state = state or ("SUCCEEDED" if end is not None else "RUNNING")
    store.db.execute(
        "INSERT INTO tasks (job_id, attempt, role, idx, state, cpu, memory_mb, gpu, launched_time, completed_time) "
        "VALUES (?,?,?,?,?,?,?,?,?,?)",
        (job_id, attempt_, "main", idx, state, cpu, memory_mb, gpu, start, end),
    )


def test_each_run_counts_its_part_inside_the_window(store: Store) -> None:
    since = NOW - 10 * H
    a = job(store, "alice", "a")
    task(store, a, NOW - 12 * H, NOW - 8 * H, gpu=2, cpu=4, memory_mb=2048)  # 2 h inside
    task(store, a, NOW - 1 * H, None, gpu=1, idx=1)  # running: 1 h to now
    task(store, a, NOW - 30 * H, NOW - 20 * H, gpu=8, idx=2)  # before the window
    task(store, a, NOW - 5 * H, None, gpu=8, idx=3, state="FAILED")  # ended, end unknown: left out
    task(store, a, None, None, gpu=8, idx=4, state="WAITING")  # never ran
    b = job(store, "bob", "b", vc="research")
    task(store, b, NOW - 3 * H, NOW - 1 * H, gpu=1)
    rows = {(r.user, r.vc): r for r in usage(store, since, NOW)}
    assert set(rows) == {("alice", "default"), ("bob", "research")}
    al = rows[("alice", "default")]
    assert al.gpu_hours_allocated == pytest.approx(2 * 2 + 1 * 1)
    assert al.cpu_hours == pytest.approx(4 * 2 + 1 * 1)
    assert al.memory_gb_hours == pytest.approx(2 * 2 + 1 * 1)
    assert al.gpu_hours_used is None and al.gpu_hours_idle is None and al.fair_share_usage is None
    assert rows[("bob", "research")].gpu_hours_allocated == pytest.approx(2)
    assert [r.user for r in usage(store, since, NOW, users=["bob"])] == ["bob"]
    runs = task_intervals(store, since, NOW)
    assert sorted((i.user, i.gpu, i.end_ms) for i in runs) == [
        ("alice", 1, None),
        ("alice", 2, NOW - 8 * H),
        ("bob", 1, NOW - 1 * H),
    ]


def test_waits_are_from_each_attempts_queueing_and_totals_name_nobody(store: Store) -> None:
    since = NOW - 10 * H
    a = job(store, "alice", "a", submitted=NOW - 9 * H)
    attempt(store, a, 0, NOW - 9 * H, NOW - 9 * H + 60_000)  # waited 60 s
    attempt(store, a, 1, NOW - 2 * H, NOW - 2 * H + 180_000)  # preempted, queued again: waited 180 s
    old = job(store, "alice", "old", submitted=NOW - 50 * H)
    attempt(store, old, 0, NOW - 50 * H, NOW - 40 * H)  # started before the window: not counted
    c = job(store, "carol", "c", submitted=NOW - 3 * H)
    attempt(store, c, 0, None, NOW - 3 * H + 30_000)  # no creation time: from the submission
    task(store, c, NOW - 3 * H, NOW - 2 * H, gpu=4)
    rows = {r.user: r for r in usage(store, since, NOW)}
    al = rows["alice"]
    assert (al.jobs_started, al.attempts_started) == (1, 2)
    assert al.wait_mean_s == pytest.approx(120) and al.wait_max_s == pytest.approx(180)
    assert rows["carol"].wait_mean_s == pytest.approx(30)
    (total,) = vc_totals(list(rows.values()))
    assert total.user is None and total.users == 2 and total.attempts_started == 3
    assert total.wait_mean_s == pytest.approx(90) and total.wait_max_s == pytest.approx(180)
    assert total.gpu_hours_allocated == pytest.approx(4)
    out = total.to_json()
    assert "username" not in out and out["users"] == 2 and out["gpuHoursUsed"] is None


def test_measured_gpu_use_gives_idle_hours(store: Store) -> None:
    a = job(store, "alice", "a")
    task(store, a, NOW - 2 * H, NOW, gpu=2)
    (row,) = usage(store, NOW - 10 * H, NOW, used={("alice", "default"): 1.5})
    assert row.gpu_hours_used == 1.5 and row.gpu_hours_idle == pytest.approx(2.5)
    assert row.to_json()["gpuHoursIdle"] == pytest.approx(2.5)


def test_ten_thousand_tasks_are_summed_in_sql_quickly(store: Store) -> None:
    with store.tx():
        for j in range(2_000):
            jid = job(store, f"u{j % 20}", f"j{j}", vc=f"vc{j % 3}")
            attempt(store, jid, 0, NOW - 100 * H + j * 1000, NOW - 100 * H + j * 2000)
            for i in range(5):
                task(store, jid, NOW - 100 * H + j * 2000, NOW - 50 * H + j * 1000, gpu=1, idx=i)
    start = time.perf_counter()
    rows = usage(store, NOW - 24 * 7 * H, NOW)
    took = time.perf_counter() - start
    assert len(rows) == 60 and sum(r.attempts_started for r in rows) == 2_000
    assert took < 1.0, took
