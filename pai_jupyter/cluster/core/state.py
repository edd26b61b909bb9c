"""What the embedded cluster holds (its store, runtime, capacity, ports, queue, the parsed-model cache, the
accounts tasks run as) and the lookups every part of it uses: a job's model, directories, owner, home, why it
waits. One ``ClusterState`` is shared by the parts that act on jobs (launching.py, ending.py) and the facade over
them, ``Cluster`` (service.py); it acts on no job itself, so it needs none of them."""

from __future__ import annotations

import asyncio
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ...common.states import FINAL
from ...protocol import Job
from ...protocol.rules import ESTIMATOR_KEY
from ..paths import os_user
from ..runtime import taskdir
from ..runtime.base import Runtime, TaskSpec
from ..runtime.hostenv import TASK_TOOLS, service_bin, usable_by_others
from ..task.env import Placement
from ..task.estimator import OUTPUTS, Layout
from ..task.taskspec import task_spec
from .accounts import Accounts
from .backfill import Waiting
from .errors import NoJobError
from .launches import launch_for
from .notify import Notifier, NotifyConfig
from .queue import JobQueue
from .scheduler import Capacity, Resources
from .sharing import Sharing
from .space import DEFAULT_FLOOR_MB, Space
from .store import JobCore, JobWithConfig, Store, TaskRow

if TYPE_CHECKING:
    from ..tracking.tracker import Tracker

JOB_CACHE = 512
PREEMPTED = -1003
"""The exit code of a preempted attempt: OpenPAI's PodPreemptedForCriticalPod (its exit spec table: transient, the
framework is always retried), with who preempted it and why as its diagnostics. The job waits again, not as a retry."""


def demand(task: TaskRow) -> Resources:
    return Resources(task["cpu"], task["memory_mb"], task["gpu"])


class ClusterState:
    """The state and lookups; ``Launcher`` (launching.py) and ``Ending`` (ending.py) act on jobs with them."""

    def __init__(
        self,
        local_dir: Path,
        runtime: Runtime,
        capacity: Capacity,
        *,
        stop_grace: float = 3.0,
        min_free_mb: int = DEFAULT_FLOOR_MB,
        notify: NotifyConfig | None = None,
        sharing: Sharing | None = None,
    ):
        self.dir = local_dir
        self.space = Space(local_dir, min_free_mb)
        self.store: Final = Store(local_dir / "state.db")  # (Final: the parts hold these four by name too)
        self.notifier = Notifier(self.store, notify)
        self.tracker: Tracker | None = None  # every job an MLflow run, where the daemon turned it on
        self.runtime: Final = runtime
        self.capacity: Final = capacity
        self.ports = runtime.ports()  # what its tasks listen on (runtime/ports.py)
        self.stop_grace = stop_grace
        self.sharing = sharing or Sharing()  # preemption, fair share, per-user quotas (cluster.yaml)
        self.watchers: dict[tuple[int, int, str, int], asyncio.Task[None]] = {}
        self.models: dict[int, Job] = {}  # the parsed-model cache, oldest first (``job_model``)
        self.queue: Final = JobQueue()
        self._homes: set[str] = set()
        self.launch: Final = launch_for(runtime, self.store, capacity)  # placed here or handed over (launches.py)
        self.spawner = ThreadPoolExecutor(max_workers=self.launch.starters, thread_name_prefix="pai-start")
        self.runtime_description = runtime.describe()
        self.accounts = Accounts(os_user(), runtime.name, home=local_dir, mapped=self.store.account_of)
        self.accounts.open_path(local_dir)
        if self.accounts.describe():
            self.runtime_description += f"; {self.accounts.describe()}"
        if self.accounts.isolating and not usable_by_others(os.path.join(service_bin(), "python3")):
            self.runtime_description += (
                f"; TensorBoard and Jupyter in other users' tasks need {TASK_TOOLS} (a Python environment "
                f"every account can use): {service_bin()} is not"
            )

    # ---- lookups -------------------------------------------------------------------------------------------------
    def stop_order(self, row: JobCore) -> tuple[float, int]:
        """(grace, signal) for stopping a task of the job's current attempt: a preempted attempt's get the job's own
        signal and grace, even one whose start is recorded only after the preemption (or a daemon's restart); any
        other gets SIGTERM and the cluster's stop grace."""
        decided = self.store.attempt(row["id"], row["attempt"])
        if decided is not None and decided["exit_code"] == PREEMPTED:
            grace, name = self.sharing.preemption_of(self.job_model(row))
            return grace, signal.Signals[f"SIG{name}"].value
        return self.stop_grace, signal.SIGTERM

    def job_model(self, row: JobCore) -> Job:
        """The parsed job (a small LRU cache: parsing costs more than a lookup, and memory stays bounded)."""
        job = self.models.pop(row["id"], None)
        if job is None:
            model = row.get("model")  # a row read with its config (JobWithConfig) carries it
            text = model if isinstance(model, str) and model else self.store.model_text(row["id"])
            if text is None:
                raise NoJobError(f"job {row.get('user')}~{row.get('name')} has no stored model")
            job = Job.model_validate_json(text)
        self.models[row["id"]] = job
        if len(self.models) > JOB_CACHE:
            self.models.pop(next(iter(self.models)))
        return job

    def forget_model(self, job_id: int) -> None:
        """Drop a job's cached model: its stored one changed (e.g. a new max run time) or the job is gone. The
        scheduler's view of it goes too: backfill must weigh the new max run time, not the one it was queued with."""
        self.models.pop(job_id, None)
        self.queue.info.pop(job_id, None)

    def get_job(self, user: str, name: str) -> JobWithConfig:
        row = self.store.job(user, name)
        if row is None:
            raise NoJobError(f"job {user}~{name} was not found")
        return row

    def task_dir(self, row: JobCore, attempt: int, role: str, idx: int, task_attempt: int) -> Path:
        # one level per task attempt (a0.main-0.t0): every directory made costs up to a millisecond on some disks
        return self.job_dir(row["user"], row["name"]) / f"a{attempt}.{role}-{idx}.t{task_attempt}"

    def is_admin(self, user: str) -> bool:
        """Admins (the OS user who runs the daemon) may hand host paths to their tasks; others may not."""
        found = self.store.user(user)
        return bool(found and found["admin"])

    def user_home(self, user: str) -> Path:
        """The user's persistent home (LeinaoPAI's /userhome), made once."""
        path = self.dir / "users" / user / "home"
        if user not in self._homes:
            path.mkdir(parents=True, exist_ok=True)
            run_as = self.accounts.run_as(user)
            if run_as is not None:
                self.accounts.check_reachable()
                taskdir.share(path.parent, run_as)  # root's: the account cannot swap its home for a link
                taskdir.give(path, run_as)
            self._homes.add(user)
        return path

    def forget_home(self, user: str) -> None:
        """The user was removed: a user of that name added later gets their home (re)made for their account."""
        self._homes.discard(user)

    def layout(self, row: JobCore, job: Job) -> Layout | None:
        """The Estimator's /ml tree of this job, when it asked for one."""
        spec = job.extras.get(ESTIMATOR_KEY)
        return Layout(self.job_dir(row["user"], row["name"]) / "ml", spec) if isinstance(spec, dict) else None

    def job_changed(self, row: JobCore, job: Job, state: str) -> None:
        """Job ``row`` became ``state`` (RUNNING, RETRIED, SUCCEEDED, FAILED, STOPPED): what the job asked to be
        told of is sent, and its MLflow run follows."""
        self.notifier.changed(row, job, state)
        if self.tracker is not None:
            layout = self.layout(row, job) if state in FINAL else None
            outputs = None
            if layout is not None:  # an ended job's outputs: what of them becomes its run's artifacts
                base = layout.root.parent
                outputs = (base, {o: layout.output(o).relative_to(base).as_posix() for o in OUTPUTS})
            self.tracker.changed(row, state, outputs)

    def task_spec(self, row: JobCore, job: Job, t: TaskRow, placements: dict[tuple[str, int], Placement]) -> TaskSpec:
        """Task row ``t``'s spec on this cluster (its runtime's view, the owner's home and account, the job's layout
        and class, its MLflow run), made once: the same when the task starts and when a service or terminal inside
        it is started later."""
        return task_spec(
            row,
            job,
            t,
            placements,
            view=self.runtime.view,
            home=self.user_home(row["user"]),
            layout=self.layout(row, job),
            host_paths=self.is_admin(row["user"]),
            run_as=self.accounts.run_as(row["user"]),
            priority=row["priority"],  # (its row carries its class: store migration 5)
            preemption=self.sharing.preemption_of(job),
            more_env=self.tracker.task_env(row) if self.tracker is not None else None,
        )

    def waiting_reason(self, row: JobCore) -> str | None:
        """Why a job waits: at the head of its line, what it lacks; behind it, the job it waits behind and for
        what, and whether it could start now were it not for that job's reservation."""
        ahead = self.queue.position(row["vc"], row["submission_time"], row["id"])
        if ahead is None and (own := self.launch.own_reason(row)) is not None:
            return own  # the words of the scheduler that holds it (``Watcher._queued``, watching.py)
        if ahead is None or row["execution_type"] != "START":
            return None
        if row["id"] in self.queue.held:
            return self.queue.held[row["id"]]
        if not ahead:
            return row["waiting_reason"]
        head = self.store.job_core(self.queue.line(row["vc"])[0])
        reason = f"{ahead} job{'s' * (ahead != 1)} ahead in virtual cluster {row['vc']!r}"
        if head is None:
            return reason
        reason += f"; behind {head['user']}~{head['name']}"
        if head["waiting_reason"]:
            reason += f" ({head['waiting_reason']})"
        mine = self.queue.info.get(row["id"])
        if isinstance(mine, Waiting):
            short = Resources(*mine.total).shortfall(self.capacity.room(row["vc"]))
            reason += f"; this job {short}" if short else "; it would fit now, but could delay that job"
        if row["vc"] in self.queue.fair and head["user"] != row["user"]:  # fair share put it there
            use = {u: self.queue.usage.get(u, 0.0) / 3600 for u in (row["user"], head["user"])}
            reason += (
                f"; fair share: {row['user']}'s recent use is {use[row['user']]:.2f} machine-hours, "
                f"{head['user']}'s {use[head['user']]:.2f}"
            )
        return reason

    def job_dir(self, user: str, name: str) -> Path:
        return self.dir / "jobs" / f"{user}~{name}"

    def new_attempt(self, job_id: int, attempt: int, job: Job) -> None:
        """The rows of the job's attempt ``attempt``: one WAITING task per instance of each role."""
        self.store.insert_attempt(
            job_id,
            attempt,
            [(r.name, i, r.cpu, r.memory_mb, r.gpu) for r in job.task_roles for i in range(r.instances)],
        )
