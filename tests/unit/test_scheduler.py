"""The scheduler's bookkeeping in-process: resources, quotas, GPUs and ports (scheduler.py), and the cluster's
queueing rules (FIFO per virtual cluster, no overtaking, gang or not, why a job waits, retries, stop) driven
through ``Cluster`` with an in-memory runtime whose tasks end when the test says so: no daemon, no process,
no sleeps."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from pai_jupyter.cluster.core.errors import InsufficientResourceError
from pai_jupyter.cluster.core.scheduler import Capacity, Resources
from pai_jupyter.cluster.core.service import Cluster
from pai_jupyter.cluster.core.sharing import Sharing
from pai_jupyter.cluster.runtime.ports import PortAllocator, PortsExhausted, parse_span
from tests.helpers.memory_cluster import MACHINE, Harness, MemoryRuntime, run, run_on, v1


# ---- resources, quotas, GPUs, ports ---------------------------------------------------------------------------
def test_shortfall_names_the_first_resource_that_does_not_fit() -> None:
    room = Resources(cpu=2, memory_mb=1024, gpu=0)
    assert Resources(1, 512, 0).shortfall(room) is None
    assert Resources(4, 512, 0).shortfall(room) == "needs 4 CPU, 2 free"
    assert Resources(1, 512, 1).shortfall(room) == "needs 1 GPU, 0 free"
    assert Resources(1, 4096, 0).shortfall(room) == "needs 4096 MB memory, 1024 free"
    assert Resources(3, 0, 0).shortfall(Resources(-1, 0, 0)) == "needs 3 CPU, 0 free"  # never a negative count
    assert Resources(1, 2, 3) + Resources(1, 1, 1) - Resources(2, 3, 4) == Resources()


def test_room_is_the_smaller_of_the_quota_left_and_the_machine_left() -> None:
    cap = Capacity(Resources(8, 8192, 2), quotas={"small": Resources(2, 1024, 1)})
    assert cap.room("default") == Resources(8, 8192, 2)  # the default VC gets the whole machine
    assert cap.room("small") == Resources(2, 1024, 1)
    cap.take("default", Resources(7, 1000, 0))
    assert cap.room("small") == Resources(1, 1024, 1)  # the machine has 1 CPU left
    assert cap.room("default") == Resources(1, 7192, 2)


def test_gpus_are_handed_out_by_index_and_come_back() -> None:
    cap = Capacity(Resources(8, 8192, 3))
    first = cap.take("default", Resources(1, 100, 2))
    second = cap.take("default", Resources(1, 100, 1))
    assert first == [0, 1] and second == [2]
    assert cap.room("default").gpu == 0
    cap.give_back("default", Resources(1, 100, 2), first)
    assert cap.free_gpus == [0, 1] and cap.room("default") == Resources(7, 8092, 2)
    again = cap.take("default", Resources(1, 100, 1), gpus=[1])  # a recovered task keeps the GPU it had
    assert again == [1] and cap.free_gpus == [0]


def test_never_fits_refuses_unknown_vcs_too_big_tasks_and_too_big_gangs() -> None:
    cap = Capacity(Resources(4, 4096, 0), quotas={"small": Resources(2, 8192, 0)})
    assert "does not exist (known: default, small)" in cap.never_fits("nope", [Resources(1, 1, 0)], True)
    assert "a task needs 3 CPU" in cap.never_fits("small", [Resources(3, 1, 0)], True)
    assert "4096 MB memory" in cap.never_fits("small", [Resources(1, 5000, 0)], True)  # the machine's limit
    gang = [Resources(2, 100, 0)] * 3
    assert "gang allocation" in cap.never_fits("default", gang, True)
    assert cap.never_fits("default", gang, False) is None


def test_ports_are_never_handed_out_twice_while_held() -> None:
    ports = PortAllocator()
    a = ports.allocate(3)
    b = ports.allocate(3)
    assert len(set(a + b)) == 6 and ports.held == set(a + b)
    ports.release(a)
    assert ports.held == set(b)
    ports.claim([a[0]])
    assert a[0] in ports.held


# ---- the cluster's queue, driven in-process (memory_cluster.py) ----------------------------------------------
def test_gang_jobs_that_each_need_all_cpus_run_one_after_the_other(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("gang1", tasks=2, cpu=4))
        h.submit(v1("gang2", tasks=2, cpu=4))
        await h.settle()
        assert h.state("gang1") == "RUNNING" and h.task_states("gang1") == ["RUNNING", "RUNNING"]
        assert h.state("gang2") == "WAITING" and h.task_states("gang2") == ["WAITING", "WAITING"]
        assert h.cluster.waiting_reason(h.row("gang2")) == "needs 8 CPU, 0 free"
        await h.end("gang1", 0)
        assert h.state("gang1") == "RUNNING"  # one task of the gang still runs
        await h.end("gang1", 1)
        assert h.state("gang1") == "SUCCEEDED" and h.state("gang2") == "RUNNING"
        assert h.row("gang2")["launched_time"] >= h.row("gang1")["completed_time"]
        assert h.cluster.capacity.used == Resources(8, 512, 0)

    run(tmp_path, body)


def test_fifo_no_overtaking_and_the_reason_counts_the_jobs_ahead(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("big", cpu=8))
        h.submit(v1("next", cpu=8))
        h.submit(v1("small", cpu=1))
        await h.settle()
        assert [h.state(n) for n in ("big", "next", "small")] == ["RUNNING", "WAITING", "WAITING"]
        assert h.cluster.waiting_reason(h.row("small")) == (
            "1 job ahead in virtual cluster 'default'; behind alice~next (needs 8 CPU, 0 free); "
            "this job needs 1 CPU, 0 free"
        )
        assert h.cluster.waiting_reason(h.row("next")) == "needs 8 CPU, 0 free"
        assert h.cluster.waiting_reason(h.row("big")) is None
        await h.end("big")
        assert [h.state(n) for n in ("big", "next", "small")] == ["SUCCEEDED", "RUNNING", "WAITING"]
        await h.end("next")
        assert h.state("small") == "RUNNING" and len(h.cluster.queue) == 0

    run(tmp_path, body)


def test_non_gang_tasks_start_as_they_fit(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("nogang", tasks=3, cpu=4, extras={"gangAllocation": False}))
        await h.settle()
        assert h.task_states("nogang") == ["RUNNING", "RUNNING", "WAITING"]
        await h.end("nogang", 0)
        assert h.task_states("nogang") == ["SUCCEEDED", "RUNNING", "RUNNING"]
        await h.end("nogang", 1)
        await h.end("nogang", 2)
        assert h.state("nogang") == "SUCCEEDED" and h.cluster.capacity.used == Resources()

    run(tmp_path, body)


def test_min_succeeded_ends_the_job_early_and_stops_the_rest(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("early", tasks=3, role={"minSucceededTaskCount": 1}))
        await h.end("early", 0)
        assert h.state("early") == "SUCCEEDED"
        assert sorted(h.runtime.stopped) == [h.key("early", 1), h.key("early", 2)]
        await h.settle()
        assert h.task_states("early") == ["SUCCEEDED", "STOPPED", "STOPPED"]
        assert h.cluster.capacity.used == Resources()

    run(tmp_path, body)


def test_a_failed_attempt_is_retried_as_a_new_attempt_at_its_place_in_the_queue(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("retry", cpu=8, retryCount=1))
        h.submit(v1("after", cpu=8))
        await h.end("retry", code=5)
        row = h.row("retry")
        assert (row["state"], row["attempt"], row["retries"]) == ("RUNNING", 1, 1)  # ahead of 'after' again
        assert h.state("after") == "WAITING"
        await h.end("retry", code=5, attempt=1)
        row = h.row("retry")
        assert (row["state"], row["exit_code"], row["trigger_role"]) == ("FAILED", 5, "main")
        assert [a["state"] for a in h.cluster.store.attempts(row["id"])] == ["FAILED", "FAILED"]
        assert h.state("after") == "RUNNING"

    run(tmp_path, body)


def test_a_failed_task_with_task_retries_starts_again_in_a_new_task_attempt(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(
            json.dumps(
                {
                    "protocolVersion": 2,
                    "name": "flaky",
                    "type": "job",
                    "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "img"}],
                    "taskRoles": {
                        "main": {
                            "instances": 1,
                            "dockerImage": "img",
                            "taskRetryCount": 1,
                            "commands": ["true"],
                            "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
                        }
                    },
                    "extras": {"gangAllocation": False},
                }
            ).encode()
        )
        await h.end("flaky", code=1)
        assert h.state("flaky") == "RUNNING"
        await h.settle()
        task = h.cluster.store.tasks(h.row("flaky")["id"])[0]
        assert (task["state"], task["task_attempt"]) == ("RUNNING", 1)
        await h.end("flaky", task_attempt=1)
        assert h.state("flaky") == "SUCCEEDED"

    run(tmp_path, body)


def test_stopping_a_waiting_job_frees_the_queue_and_a_running_one_stops_its_tasks(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("hog", cpu=8))
        h.submit(v1("waits", cpu=8))
        await h.settle()
        h.cluster.stop(h.row("waits"), "stopped by alice")
        assert h.state("waits") == "STOPPED" and h.task_states("waits") == ["STOPPED"]
        assert h.cluster.waiting_reason(h.row("waits")) is None
        h.cluster.stop(h.row("hog"), "stopped by alice")
        assert h.state("hog") == "STOPPING" and h.runtime.stopped == [h.key("hog")]
        await h.settle()
        assert h.state("hog") == "STOPPED" and h.task_states("hog") == ["STOPPED"]
        assert h.cluster.capacity.used == Resources() and len(h.cluster.queue) == 0

    run(tmp_path, body)


def test_a_job_that_can_never_fit_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        with pytest.raises(InsufficientResourceError, match="needs 64 CPU"):
            h.submit(v1("toobig", cpu=64))
        with pytest.raises(InsufficientResourceError, match="gang"):
            h.submit(v1("toomany", tasks=3, cpu=4))
        assert h.cluster.store.all("SELECT name FROM jobs") == [] and len(h.cluster.queue) == 0

    run(tmp_path, body)


# ---- priorities and backfill on the cluster (the plan itself: test_backfill.py) --------------------------------
def test_the_issues_example_small_jobs_run_in_the_gaps_of_a_waiting_gang_job(tmp_path: Path) -> None:
    """2 CPUs, one busy for at most 10 minutes; a 2-task gang job at the head, ten 1-task jobs of at most 5 minutes
    behind it: a small job takes the free CPU whenever it would end in time, the gang job starts as the CPUs come
    back. (A job that ends before its max run time may leave a backfilled one running past it: EASY promises the
    time reserved from the estimates, which is FIFO's when jobs run their estimates.)"""

    async def body(h: Harness) -> None:
        h.submit(v1("blocker", extras={"maxRunTimeMinutes": 10}))
        h.submit(v1("gang", tasks=2, extras={"maxRunTimeMinutes": 60}))
        small = [h.submit(v1(f"small{i}", extras={"maxRunTimeMinutes": 5})) for i in range(10)]
        await h.settle()
        states = [h.state(n) for n in small]
        assert h.state("gang") == "WAITING" and states == ["RUNNING"] + ["WAITING"] * 9
        assert h.cluster.waiting_reason(h.row("gang")) == "needs 2 CPU, 0 free"
        reason = h.cluster.waiting_reason(h.row("small1"))
        assert reason is not None and "behind alice~gang (needs 2 CPU, 0 free)" in reason
        for name in small:  # each ends (by its max run time) before the blocker must: the next takes its place
            assert h.state(name) == "RUNNING" and h.state("gang") == "WAITING"
            await h.end(name)
        await h.end("blocker")
        assert h.state("gang") == "RUNNING"  # as soon as the CPUs are back, as under FIFO

    run_on(tmp_path, Resources(2, 8192, 0), body)


def test_a_small_job_without_a_run_time_may_not_take_what_the_head_waits_for(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("blocker"))
        h.submit(v1("gang", tasks=2))
        h.submit(v1("small"))
        await h.settle()
        assert [h.state(n) for n in ("blocker", "gang", "small")] == ["RUNNING", "WAITING", "WAITING"]
        assert h.cluster.waiting_reason(h.row("small")).endswith("it would fit now, but could delay that job")

    run_on(tmp_path, Resources(2, 8192, 0), body)


@pytest.mark.parametrize("same_ms", [False, True], ids=["apart", "one-millisecond"])
def test_priority_classes_and_an_admins_reordering_decide_who_is_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_ms: bool
) -> None:
    """Also with every job submitted in the same millisecond (a fast machine): they share one queue key, so a
    place between two of them must not come from their keys' midpoint."""
    from pai_jupyter.cluster.core import service
    from pai_jupyter.cluster.core.priority import reprioritise

    if same_ms:
        monkeypatch.setattr(service, "now_ms", lambda: 1_800_000_000_000)

    async def body(h: Harness) -> None:
        h.submit(v1("hog", cpu=8))
        for name in ("a", "b", "c", "d"):
            h.submit(v1(name, cpu=8))
        h.submit(v1("urgent", cpu=8, extras={"hivedScheduler": {"jobPriorityClass": "prod"}}))
        h.submit(v1("spare", cpu=8, extras={"hivedScheduler": {"jobPriorityClass": "oppo"}}))
        await h.settle()
        line = ["urgent", "a", "b", "c", "d", "spare"]
        assert [h.cluster.queue.position("default", 0, h.row(n)["id"]) for n in line] == list(range(6))
        assert h.cluster.store.list_item(h.row("urgent")["id"])["jobPriority"] == "prod"
        assert reprioritise(h.cluster, h.row("c"), None, 0) == {"jobPriority": "default", "ahead": 1}
        assert reprioritise(h.cluster, h.row("spare"), "crit", None) == {"jobPriority": "crit", "ahead": 0}
        assert reprioritise(h.cluster, h.row("a"), None, 2) == {"jobPriority": "default", "ahead": 4}
        order = []
        for running in ("hog", "spare", "urgent", "c", "b", "a", "d"):
            assert h.state(running) == "RUNNING", (running, order)
            order.append(running)
            await h.end(running)
        assert order == ["hog", "spare", "urgent", "c", "b", "a", "d"]

    run(tmp_path, body)


def test_a_task_must_fit_one_node_of_a_batch_systems_cluster() -> None:
    """Two 4000 MB nodes hold 8000 MB together, but a 4096 MB task fits neither (Slurm refused it at start)."""
    node = Resources(2, 4000, 0)
    cap = Capacity(total=Resources(4, 8000, 0), nodes=[node, node])
    assert cap.never_fits("default", [Resources(1, 4096, 0)], True) == (
        "a task needs 1 CPU, 4096 MB memory, 0 GPU, more than one node has (each of its 2 nodes has 2 CPU, "
        "4000 MB memory, 0 GPU)"
    )
    assert cap.never_fits("default", [Resources(2, 4000, 0), Resources(2, 4000, 0)], True) is None
    mixed = Capacity(total=Resources(6, 12000, 1), nodes=[Resources(2, 4000, 0), Resources(4, 8000, 1)])
    assert cap.never_fits("default", [Resources(3, 5000, 0)], False) is not None
    assert mixed.never_fits("default", [Resources(3, 5000, 1)], False) is None
    assert "its nodes have 4 CPU, 8000 MB memory, 1 GPU; 2 CPU, 4000 MB memory, 0 GPU" in str(
        mixed.never_fits("default", [Resources(1, 9000, 0)], False)
    )


def test_ports_from_a_span_go_round_it_skip_busy_ones_and_run_out_clearly() -> None:
    ports = PortAllocator((29100, 29103))
    assert ports.room() == 4 and ports.allocate(2) == [29100, 29101] and ports.allocate(1) == [29102]
    ports.release([29100])
    assert ports.allocate(1) == [29103]  # a port just given back is the last taken again
    assert ports.allocate(1) == [29100]
    with pytest.raises(PortsExhausted, match=r"no 1 free ports in 29100-29103 \(4 held by tasks\)"):
        ports.allocate(1)
    fresh = PortAllocator((29100, 29103))
    with socket.socket() as busy:  # another program's listener on this host
        busy.bind(("", 29101))
        busy.listen()
        assert fresh.allocate(2) == [29100, 29102]
    assert PortAllocator().room() is None


@pytest.mark.parametrize(
    ("text", "wrong"),
    [("80-90", "no privileged"), ("30000-20000", "upwards"), ("20000", "like 20000-29999"), ("a-b", "like")],
)
def test_a_task_port_range_is_read_or_refused_saying_why(text: str, wrong: str) -> None:
    assert parse_span(" 20000-29999 ") == (20000, 29999)
    with pytest.raises(ValueError, match=wrong):
        parse_span(text)


def test_a_job_waits_for_ports_in_the_span_and_one_wanting_more_than_it_holds_is_refused(tmp_path: Path) -> None:
    def wants(name: str, count: int) -> bytes:
        return v1(name, role={"portList": [{"label": "http", "beginAt": 0, "portNumber": count}]})

    async def main() -> None:
        runtime = MemoryRuntime()
        runtime.task_ports = (29110, 29112)
        cluster = Cluster(tmp_path / "local", runtime, Capacity(MACHINE), sharing=Sharing(preempt=False, half_life_s=0))
        h = Harness(cluster, runtime)
        try:
            with pytest.raises(InsufficientResourceError, match=r"want 4 ports .* hands out 3 \(29110-29112"):
                h.submit(wants("toomany", 4))
            h.submit(wants("first", 2))
            h.submit(wants("second", 2))
            await h.settle()
            assert (h.state("first"), h.state("second")) == ("RUNNING", "WAITING")
            assert "waiting for free ports: no 2 free ports in 29110-29112" in h.row("second")["waiting_reason"]
            await h.end("first")
            assert h.state("second") == "RUNNING"
            assert json.loads(cluster.store.tasks(h.row("second")["id"])[0]["ports"]) == {"http": [29112, 29110]}
        finally:
            cluster.spawner.shutdown(wait=False)
            cluster.store.close()

    asyncio.run(main())
