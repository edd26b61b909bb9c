"""The scheduler's bulk read of waiting jobs (cluster/core/store/waiting.py) gives what parsing each job's model
gives, and the first pass after a restart parses no model (P18C in tests/bench/queue.py times it)."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

from pai_jupyter.cluster.core.scheduler import Resources
from pai_jupyter.cluster.core.store.waiting import waiting_views
from pai_jupyter.protocol import Job
from tests.helpers.memory_cluster import Harness, run_on, v1


def test_the_bulk_read_agrees_with_the_model_and_needs_no_parse(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("blocker", cpu=2))  # every later job waits
        names = {
            "plain": v1("plain"),
            "loose": v1("loose", tasks=3, extras={"gangAllocation": False, "maxRunTimeMinutes": 7}),
            "strict": v1("strict", tasks=2, extras={"gangAllocation": True, "maxRunTimeMinutes": 1.5}),
            "gpu": v1("gpu", role={"gpuNumber": 0, "memoryMB": 512}),
        }
        for body_ in names.values():
            h.submit(body_)
        await h.settle()
        ids = {n: h.row(n)["id"] for n in names}
        views = waiting_views(h.cluster.store, [*ids.values(), h.row("blocker")["id"], 9999])
        assert set(views) == set(ids.values())  # the running job and an unknown id are left out
        for name, job_id in ids.items():
            job = Job.model_validate_json(h.cluster.store.model_text(job_id) or "")
            tasks = h.cluster.store.waiting_tasks(job_id, 0)
            view = views[job_id]
            assert view["gang"] == job.gang_allocation, name
            assert view["max_run_time_minutes"] == job.max_run_time_minutes, name
            assert view["tasks"] == [(t["cpu"], t["memory_mb"], t["gpu"]) for t in tasks], name
        # a restart's first pass: nothing in memory, and no model parsed to plan
        h.cluster.queue.info.clear()
        h.cluster.state.models.clear()
        with mock.patch.object(Job, "model_validate_json", side_effect=AssertionError("parsed a model")):
            h.cluster.schedule()
        assert {n: h.state(n) for n in names} == dict.fromkeys(names, "WAITING")
        assert h.cluster.queue.info[ids["loose"]].gang is False

    run_on(tmp_path, Resources(2, 8192, 0), body)


def test_a_waiting_jobs_new_max_run_time_is_what_backfill_weighs(tmp_path: Path) -> None:
    """A waiting job's max run time raised from 5 to 60 minutes: it no longer ends before the gang job's
    reservation (the blocker's 10 minutes), so it must not be backfilled when a gap opens (it would hold the CPU
    the gang job needs for an hour: the head would wait past the time reserved for it)."""
    from pai_jupyter.cluster.core.maxruntime import set_max_run_time

    async def body(h: Harness) -> None:
        h.submit(v1("blocker", extras={"maxRunTimeMinutes": 10}))
        h.submit(v1("gang", tasks=2, extras={"maxRunTimeMinutes": 60}))
        h.submit(v1("s1", extras={"maxRunTimeMinutes": 5}))
        h.submit(v1("s2", extras={"maxRunTimeMinutes": 5}))
        await h.settle()
        assert [h.state(n) for n in ("blocker", "gang", "s1", "s2")] == ["RUNNING", "WAITING", "RUNNING", "WAITING"]
        set_max_run_time(h.cluster, h.row("s2"), 60, "alice")
        await h.end("s1")  # a gap: only a job that ends within the blocker's 10 minutes may take it
        assert h.state("s2") == "WAITING" and h.state("gang") == "WAITING"

    run_on(tmp_path, Resources(2, 8192, 0), body)
