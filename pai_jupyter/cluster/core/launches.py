"""How a runtime's jobs are launched, chosen once from what the runtime supplies (``launch_for``): the core asks
this object what to do, and never which kind of runtime it has.

- ``Placed``: the daemon places each task (its plan, backfill.py, on this machine's capacity, with the ports it
  allocates), starts each task as soon as it is placed, and the task runs from its start.
- ``Handed``: a runtime that is a batch system (``runtime.base.Batch``, Slurm's) places whole jobs itself. The
  daemon hands it every task of an attempt at once, as soon as they wait, checks no capacity of its own, and a task
  runs once that scheduler places it (``Batch.running``), which also says where and why the job still waits.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from ...protocol import Job
from ..runtime.base import Batch, Held, Runtime, TaskHandle, TaskSpec, Where
from ..task.env import Placement
from .backfill import Plan, Waiting
from .scheduler import Capacity, Resources
from .store import JobCore, JobRow, Store, TaskRow, dumps, loads


class Starter(Protocol):
    """The two ways ``Launcher`` (launching.py) starts the tasks of one job attempt."""

    def start_each(
        self, row: JobCore, job: Job, tasks: list[TaskRow], placements: dict[tuple[str, int], Placement]
    ) -> None: ...

    def start_together(
        self,
        row: JobCore,
        job: Job,
        tasks: list[TaskRow],
        placements: dict[tuple[str, int], Placement],
        start_job: Callable[[list[TaskSpec]], list[TaskHandle]],
    ) -> None: ...


PlanWith = Callable[[dict[str, list[Waiting]]], Plan]
"""The daemon's own plan of what starts now (backfill.py, after quotas and fair share: ``Launcher.plan``)."""


class Launch(abc.ABC):
    """What differs between launching by the daemon's plan and handing over to a batch system's scheduler."""

    starters: int = 4
    """Threads that start tasks (a fork/exec, a Docker create, an ``sbatch``) off the event loop."""

    def __init__(self, runtime: Runtime, store: Store, capacity: Capacity) -> None:
        self.runtime, self.store, self.capacity = runtime, store, capacity

    @abc.abstractmethod
    def plan(self, queues: dict[str, list[Waiting]], own_plan: PlanWith) -> Plan:
        """What starts now of each virtual cluster's queue (``starts``: job ids and how many of their waiting
        tasks; ``heads``: what each line's head waits for, and may preempt for)."""

    @abc.abstractmethod
    def take(self, vc: str, need: Resources) -> list[int]:
        """Take a launched task's room; the GPUs it got."""

    @abc.abstractmethod
    def give_back(self, vc: str, need: Resources, gpus: list[int]) -> None:
        """Give back what ``take`` (or ``take_again``) took: the task ended, or its launch was not written."""

    @abc.abstractmethod
    def take_again(self, vc: str, need: Resources, gpus: list[int]) -> None:
        """A restarted daemon re-counts the room of a task that still runs."""

    @abc.abstractmethod
    def queued_reason(self) -> str | None:
        """Why a launched job still waits (None: it runs from its launch)."""

    @abc.abstractmethod
    def start(
        self,
        starter: Starter,
        row: JobCore,
        job: Job,
        tasks: list[TaskRow],
        placements: dict[tuple[str, int], Placement],
    ) -> None:
        """Start the launched ``tasks`` of one attempt, through ``starter``."""

    @abc.abstractmethod
    def started(self, handle: TaskHandle) -> tuple[dict[str, Any], str, str]:
        """A task's start was recorded: its row's new fields, its event's reason and words."""

    async def placed(self, handle: TaskHandle, task_dir: Path, waiting: Callable[[str], None]) -> Where | None:
        """Resolve once a started task runs where it was not placed by the daemon (None: placed at its start, or
        it ended without running). Default: None at once."""
        return None

    async def allocation_ended(self, handle: TaskHandle, last: Callable[[], bool]) -> str:
        """A task's end was read: what ending its allocation took, if anything (see ``Batch.end_allocation``).
        Default: nothing (a task's end is its process's or container's)."""
        return ""

    def holds(self, row: JobCore) -> bool:
        """The job's attempt is held by a scheduler other than the daemon's (its tasks may end while it waits)."""
        return False

    def own_reason(self, row: JobCore) -> str | None:
        """Why a job not in the daemon's queue waits, in the words of the scheduler that holds it (None: none)."""
        return None

    def reprioritise(self, handles: list[TaskHandle], priority: str | None) -> None:
        """A launched job got a new priority class (the daemon's queue orders the jobs it has not launched)."""
        return None

    def held_jobs(self, queued: dict[int, Any], visible: Callable[[JobRow], bool]) -> Iterator[tuple[JobRow, Held]]:
        """The waiting jobs held by another scheduler (not in the daemon's queue, ``queued``), with where. Default:
        none."""
        return iter(())


class Placed(Launch):
    """The daemon places each task (see the module's docstring)."""

    def plan(self, queues: dict[str, list[Waiting]], own_plan: PlanWith) -> Plan:
        return own_plan(queues)

    def take(self, vc: str, need: Resources) -> list[int]:
        return self.capacity.take(vc, need)

    def give_back(self, vc: str, need: Resources, gpus: list[int]) -> None:
        self.capacity.give_back(vc, need, gpus)

    def take_again(self, vc: str, need: Resources, gpus: list[int]) -> None:
        self.capacity.take(vc, need, gpus)

    def queued_reason(self) -> str | None:
        return None

    def start(
        self,
        starter: Starter,
        row: JobCore,
        job: Job,
        tasks: list[TaskRow],
        placements: dict[tuple[str, int], Placement],
    ) -> None:
        starter.start_each(row, job, tasks, placements)

    def started(self, handle: TaskHandle) -> tuple[dict[str, Any], str, str]:
        fields = {"state": "RUNNING", "handle": dumps(handle.to_dict())}
        return fields, "TaskStarted", f"started on the {self.runtime.name} runtime"


class Handed(Launch):
    """A batch system's scheduler places whole jobs (see the module's docstring). It ranks jobs of one priority by
    the order it got them (Slurm's job ids): it gets them one at a time, in the queue's order, not from racing
    threads."""

    starters = 1

    def __init__(self, runtime: Runtime, batch: Batch, store: Store, capacity: Capacity) -> None:
        super().__init__(runtime, store, capacity)
        self.batch = batch

    def plan(self, queues: dict[str, list[Waiting]], own_plan: PlanWith) -> Plan:
        # every waiting job goes to the scheduler now, whole; it weighs them (no heads here, no preemption)
        return Plan(starts=[(w.id, len(w.tasks)) for line in queues.values() for w in line])

    def take(self, vc: str, need: Resources) -> list[int]:
        return []  # the scheduler accounts for its nodes

    def give_back(self, vc: str, need: Resources, gpus: list[int]) -> None:
        return None

    def take_again(self, vc: str, need: Resources, gpus: list[int]) -> None:
        return None

    def queued_reason(self) -> str | None:
        return f"submitted to the {self.runtime.name} runtime's scheduler"

    def start(
        self,
        starter: Starter,
        row: JobCore,
        job: Job,
        tasks: list[TaskRow],
        placements: dict[tuple[str, int], Placement],
    ) -> None:
        starter.start_together(row, job, tasks, placements, self.batch.start_job)

    def started(self, handle: TaskHandle) -> tuple[dict[str, Any], str, str]:
        # RUNNING once the scheduler runs it (``placed``)
        return (
            {"handle": dumps(handle.to_dict())},
            "TaskSubmitted",
            f"submitted to the {self.runtime.name} runtime as {handle.id}",
        )

    async def placed(self, handle: TaskHandle, task_dir: Path, waiting: Callable[[str], None]) -> Where | None:
        return await self.batch.running(handle, task_dir, waiting)

    async def allocation_ended(self, handle: TaskHandle, last: Callable[[], bool]) -> str:
        return await self.batch.end_allocation(handle) if last() else ""

    def holds(self, row: JobCore) -> bool:
        return row["state"] == "WAITING"

    def own_reason(self, row: JobCore) -> str | None:
        return row["waiting_reason"] if row["state"] == "WAITING" else None

    def reprioritise(self, handles: list[TaskHandle], priority: str | None) -> None:
        self.batch.reprioritise(handles, priority)

    def held_jobs(self, queued: dict[int, Any], visible: Callable[[JobRow], bool]) -> Iterator[tuple[JobRow, Held]]:
        for row in self.store.jobs_in_state("WAITING"):
            if not visible(row) or row["execution_type"] != "START" or row["id"] in queued:
                continue
            handles = [t["handle"] for t in self.store.tasks(row["id"], row["attempt"]) if t["handle"]]
            where = self.batch.held(TaskHandle.from_dict(loads(handles[0]))) if handles else None
            if where is not None:  # (None: being handed over, or starting)
                yield row, where


def launch_for(runtime: Runtime, store: Store, capacity: Capacity) -> Launch:
    """The launch of ``runtime``'s jobs: handed to its scheduler when it is a batch system, else placed here."""
    return Handed(runtime, runtime, store, capacity) if isinstance(runtime, Batch) else Placed(runtime, store, capacity)
