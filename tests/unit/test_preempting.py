"""Preemption, per-user quotas and borrowing driven through ``Cluster`` in-process (memory_cluster.py): who is
preempted, how it is told (signal, grace), that it waits again as its next attempt (not a retry), what a stop
during a preemption does, and why a job over its quota waits. The plan itself is property-tested in
test_preemptplan.py, the fair-share order in test_fairshare.py."""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

from pai_jupyter.cluster.core.sharing import Sharing, UserQuota
from pai_jupyter.cluster.core.state import PREEMPTED
from pai_jupyter.cluster.runtime.base import TaskHandle, TaskSpec
from tests.helpers.memory_cluster import MACHINE, Harness, MemoryRuntime, run, run_on, v1
from tests.polling import async_wait_for

CRIT = {"hivedScheduler": {"jobPriorityClass": "crit"}}
OPPO = {"hivedScheduler": {"jobPriorityClass": "oppo"}}
SHARING = Sharing(grace_s=7, half_life_s=0)


def events(h: Harness, name: str, user: str = "alice") -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in h.cluster.store.events(h.row(name, user)["id"])]


def test_a_crit_job_preempts_an_oppo_job_which_waits_again_as_its_next_attempt(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("spare", cpu=8, extras=OPPO))
        await h.settle()
        h.submit(v1("urgent", cpu=4, extras=CRIT), user="bob")
        await h.settle()
        assert h.runtime.signals == [(h.key("spare"), 7.0, signal.SIGTERM)]  # the cluster's grace and signal
        assert h.row("urgent", "bob")["state"] == "RUNNING"
        row = h.row("spare")
        assert (row["state"], row["attempt"], row["retries"]) == ("WAITING", 1, 0)  # not a retry
        first = h.cluster.store.attempt(row["id"], 0)
        assert first is not None
        assert (first["state"], first["exit_code"]) == ("FAILED", PREEMPTED)
        said = dict(events(h, "spare"))
        assert said["JobPreempted"].startswith("preempted by bob~urgent: ")
        assert "SIGTERM, SIGKILL 7 s later" in said["JobPreempted"]
        assert "attempt 1 waits" in said["JobRequeued"]
        await h.end("urgent", user="bob")
        assert h.state("spare") == "RUNNING" and h.row("spare")["attempt"] == 1
        await h.end("spare", attempt=1)
        assert h.state("spare") == "SUCCEEDED"

    run(tmp_path, body, SHARING)


class SlowStarts(MemoryRuntime):
    """Starts that take until the test lets them through (``go``): the task is STARTING, with no handle yet."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def start_quick(self, spec: TaskSpec) -> TaskHandle | None:
        self.exits[spec.key] = asyncio.get_running_loop().create_future()
        self.specs[spec.key] = spec
        return None  # the launcher starts it in a thread: start()

    def start(self, spec: TaskSpec) -> TaskHandle:
        self.go.wait(30)
        return TaskHandle(runtime=self.name, id=spec.key, info={})


def test_a_task_whose_start_is_recorded_after_the_preemption_gets_the_jobs_signal_and_grace(tmp_path: Path) -> None:
    """The job is preempted while its task is still starting (no handle to signal yet): once the start is
    recorded, the task is stopped as the preemption said, with the job's own signal and grace. It used to get
    SIGTERM and the cluster's stop grace, so its command never saved (CI-29: a container's got no USR1)."""
    runtime = SlowStarts()
    runtime.ends_on_stop = False

    async def body(h: Harness) -> None:
        own = {**OPPO, "preemption": {"graceSeconds": 2, "signal": "USR1"}}
        h.submit(v1("spare", cpu=8, extras=own))
        await h.settle()
        assert h.task_states("spare") == ["STARTING"] and h.state("spare") == "RUNNING"
        h.submit(v1("urgent", cpu=4, extras=CRIT))
        await h.settle()
        assert "JobPreempted" in dict(events(h, "spare")) and runtime.signals == []  # nothing to signal yet
        runtime.go.set()

        async def signalled() -> list[tuple[str, float, int]]:
            await asyncio.sleep(0.01)
            return runtime.signals

        assert await async_wait_for(signalled, 10, "the stop") == [(h.key("spare"), 2.0, signal.SIGUSR1)]
        await h.end("spare")
        assert h.row("spare")["attempt"] == 1 and h.state("urgent") == "RUNNING"

    run_on(tmp_path, MACHINE, body, SHARING, runtime=runtime)


def test_the_jobs_own_signal_and_grace_and_the_preempted_job_holds_until_its_tasks_end(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.runtime.ends_on_stop = False  # the task takes its grace
        own = {**OPPO, "preemption": {"graceSeconds": 2, "signal": "USR1"}}
        h.submit(v1("spare", cpu=8, extras=own))
        await h.settle()
        h.submit(v1("urgent", cpu=4, extras=CRIT))
        await h.settle()
        assert h.runtime.signals == [(h.key("spare"), 2.0, signal.SIGUSR1)]
        assert h.state("spare") == "RUNNING" and h.state("urgent") == "WAITING"  # until its task ends
        h.submit(v1("urgent2", cpu=4, extras=CRIT))
        await h.settle()
        assert len(h.runtime.signals) == 1  # what is on its way out counts: nothing more is preempted
        spec = h.runtime.specs[h.key("spare")]
        assert spec.env["PAI_PREEMPT_GRACE_SECONDS"] == "2" and spec.env["PAI_PREEMPT_SIGNAL"] == "USR1"
        assert spec.env["PAI_CHECKPOINT_DIR"].endswith("/jobs/alice~spare/output/checkpoints/")
        await h.end("spare", code=143)
        assert h.state("urgent") == "RUNNING" and h.state("urgent2") == "RUNNING"
        assert h.row("spare")["state"] == "WAITING" and h.row("spare")["attempt"] == 1

    run(tmp_path, body, SHARING)


def test_a_job_stopped_while_it_is_preempted_ends_stopped(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.runtime.ends_on_stop = False
        h.submit(v1("spare", cpu=8, extras=OPPO))
        await h.settle()
        assert h.cluster.preempt(h.row("spare"), "by hand")
        h.cluster.stop(h.row("spare"), "stopped by its owner")
        await h.end("spare", code=143)
        row = h.row("spare")
        assert (row["state"], row["attempt"]) == ("STOPPED", 0)
        assert not h.cluster.preempt(row, "again")  # only a running job is preempted

    run(tmp_path, body, SHARING)


def test_equal_classes_never_preempt_and_a_job_is_preempted_at_most_n_times_an_hour(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("long", cpu=8))
        h.submit(v1("same", cpu=8))  # the same class: it waits
        await h.settle()
        assert h.runtime.signals == [] and h.state("same") == "WAITING"
        h.submit(v1("spare", cpu=8, extras=OPPO), user="bob")
        await h.end("long")
        await h.end("same")
        assert h.row("spare", "bob")["state"] == "RUNNING"
        for n in range(2):  # maxPerHour 2: two crit jobs preempt it, the third waits for it
            h.submit(v1(f"crit{n}", cpu=8, extras=CRIT))
            await h.settle()
            assert h.state(f"crit{n}") == "RUNNING"
            await h.end(f"crit{n}")
            assert h.row("spare", "bob")["attempt"] == n + 1 and h.row("spare", "bob")["state"] == "RUNNING"
        h.submit(v1("crit2", cpu=8, extras=CRIT))
        await h.settle()
        assert h.state("crit2") == "WAITING" and h.row("spare", "bob")["state"] == "RUNNING"

    run(tmp_path, body, Sharing(max_per_hour=2, half_life_s=0))


def test_a_user_at_their_quota_waits_with_the_reason_while_others_run(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("one", cpu=4))
        h.submit(v1("two", cpu=2))
        h.submit(v1("theirs", cpu=2), user="bob")
        await h.settle()
        assert [h.state("one"), h.state("two"), h.row("theirs", "bob")["state"]] == ["RUNNING", "WAITING", "RUNNING"]
        assert h.cluster.waiting_reason(h.row("two")) == (
            "alice is at their quota in virtual cluster 'default': 4 of 4 CPU in use, this job needs 2"
        )
        await h.end("one")
        assert h.state("two") == "RUNNING"

    quotas = {"*": {"*": UserQuota(cpu=4)}}
    run(tmp_path, body, Sharing(half_life_s=0, quotas=quotas))


def test_borrowed_room_runs_preemptible_and_goes_to_a_job_within_its_quota(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        h.submit(v1("mine", cpu=4))
        h.submit(v1("borrowed", cpu=4))  # over alice's quota of 4, on room nobody wants: it runs
        await h.settle()
        assert h.state("mine") == "RUNNING" and h.state("borrowed") == "RUNNING"
        h.submit(v1("theirs", cpu=4), user="bob")  # the same class, within bob's quota
        await h.settle()
        assert h.runtime.signals == [(h.key("borrowed"), 30.0, signal.SIGTERM)]  # the borrowed one, not "mine"
        assert h.row("theirs", "bob")["state"] == "RUNNING" and h.state("mine") == "RUNNING"
        assert "over its user's quota" in dict(events(h, "borrowed"))["JobPreempted"]
        assert h.state("borrowed") == "WAITING"

    quotas = {"*": {"*": UserQuota(cpu=4)}}
    run(tmp_path, body, Sharing(half_life_s=0, quotas=quotas, borrow={"*": True}))


def test_the_cluster_yaml_says_how_the_cluster_is_shared() -> None:
    s = Sharing.from_config(
        {
            "preemption": {"graceSeconds": 5, "signal": "INT", "maxPerHour": 2},
            "fairShare": {"halfLifeHours": 2},
            "userQuota": {"gpu": 1},
            "virtualClusters": {
                "big": {"userQuota": {"gpu": 4, "jobs": 2}, "users": {"ann": {"gpu": 8}}, "borrow": True}
            },
        }
    )
    assert (s.grace_s, s.signal, s.max_per_hour, s.half_life_s) == (5.0, "INT", 2, 7200.0)
    assert s.quota("default", "bob") == UserQuota(gpu=1) and s.quota("big", "bob") == UserQuota(gpu=4, jobs=2)
    assert s.quota("big", "ann") == UserQuota(gpu=8) and s.borrows("big") and not s.borrows("default")
    assert Sharing.from_config({}).quota("default", "bob") is None
    for bad, said in (
        ({"preemption": {"signal": "KILL"}}, "signal: 'KILL' must be one of TERM, INT"),
        ({"fairShare": {"halfLifeHours": -1}}, "fairShare.halfLifeHours"),
        ({"userQuota": {"gpus": 1}}, "userQuota: unknown key(s) gpus"),
        ({"virtualClusters": {"v": {"users": {"x": {"gpu": -1}}}}}, "virtualClusters.v.users.x.gpu"),
        ({"virtualClusters": {"v": {"borrow": "yes"}}}, "virtualClusters.v.borrow must be true or false"),
    ):
        try:
            Sharing.from_config(bad)
        except ValueError as exc:
            assert said in str(exc), (bad, exc)
        else:
            raise AssertionError(f"{bad} was accepted")
