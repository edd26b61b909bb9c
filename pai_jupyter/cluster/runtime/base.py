"""What the daemon asks of a runtime: start a task, wait for its end, stop it, re-attach after a restart.

Each task runs under a small shim that writes its logs (``stdout``, ``stderr``, ``all``, and ``runtime`` for the
runtime's own notices) and its exit status into the task directory as they happen (``taskdir.py`` names every
file). The process runtime runs the C shim (``shim.c``, compiled once per machine, started ahead of its task by
the warm pool) and falls back to ``shim.sh`` without a C compiler; the Docker runtime runs ``shim.sh`` in each
container (the image's bash, else its sh). Nothing the runtime needs lives only in the daemon's memory: a daemon
killed with -9 re-attaches from the persisted ``TaskHandle`` and the files.
"""

from __future__ import annotations

import abc
import pwd
import signal
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .ports import PortAllocator, Span
from .view import HOST, Mount, TaskView

# Exit codes with a meaning of their own (OpenPAI's exit spec where it has one).
EXIT_IMAGE_NOT_FOUND = 254
EXIT_OOM = -1200
EXIT_LOST = -1300  # the task disappeared while the daemon was down and left no exit status
EXIT_START_FAILED = 255

LOOPBACK = "127.0.0.1"
LOCAL_NODE = "local"  # the node name the task table shows for this machine's runtimes

DEFAULT_PIDS_LIMIT = 4096
"""The most processes (threads included) one task may have, by default (the daemon's ``--pids-limit``): a fork
bomb in a task stays in that task. 0: no limit."""


@dataclass
class TaskSpec:
    """Everything a runtime needs to run one attempt of one task."""

    key: str  # unique per task attempt, e.g. "alice~job1.a0.worker.1.t0"; used in labels
    user: str
    job_name: str
    role: str
    index: int
    job_attempt: int
    task_attempt: int
    script: str  # the rendered commands (run by bash with errexit, nounset, pipefail; see shim.c)
    env: dict[str, str]
    image: str | None
    cpu: int
    memory_mb: int
    shm_mb: int
    gpus: list[int]
    task_dir: Path  # host directory: shim files and the logs
    work_dir: str | None = None  # working directory inside the task (process runtime: a host path)
    mounts: list[Mount] = field(default_factory=list)
    shown_script: str | None = None  # what command.sh on disk shows: the script with secrets masked (None: same)
    run_as: tuple[int, int] | None = None  # process runtime as root: (uid, gid) of the account the task runs as
    gpu_count: int = 0  # GPUs the task asks for (a runtime that places GPUs itself, e.g. Slurm's gres)
    time_limit_minutes: float | None = None  # the job's max run time (a batch system enforces it too)
    vc: str = "default"  # the job's virtual cluster (Slurm: its partition)
    priority: str | None = None  # the job's priority class (crit, prod, test, oppo; None: OpenPAI's default)

    def disk_script(self) -> str:
        """The script as it may be written to disk (secrets masked): the real one reaches the shell in memory."""
        return self.script if self.shown_script is None else self.shown_script


@dataclass
class TaskHandle:
    """How to find a started task again; stored as JSON in the daemon's database."""

    runtime: str  # "process" | "docker"
    id: str  # pid (process) or container id (docker)
    info: dict[str, Any] = field(default_factory=dict)  # e.g. create_time, cgroup path, memory enforcement

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskHandle:
        return cls(runtime=data["runtime"], id=str(data["id"]), info=dict(data.get("info") or {}))


@dataclass
class TaskExit:
    """How a task ended. ``exit_code`` is the command's status (128+N for signal N), or one of the EXIT_ codes."""

    exit_code: int
    diagnostics: str = ""
    oom: bool = False
    signal: int | None = None
    preempted: str | None = None  # why a runtime's own scheduler preempted it (Slurm's QOS): the job is queued again


@dataclass
class Where:
    """Where a started task runs, once it runs: its node, that node's IP (``containerIp``), and the GPUs a runtime
    that places them itself gave it (None: the daemon's own choice stands)."""

    node: str
    ip: str
    gpus: list[int] | None = None


@dataclass(frozen=True)
class Node:
    """A machine a runtime runs tasks on (OpenPAI's ``/api/v2/kubernetes/nodes`` lists them): its name as tasks
    show it, its address, what it has and whether it takes tasks."""

    name: str
    address: str
    cpu: int
    memory_mb: int
    gpu: int
    ready: bool = True


class TaskStartError(RuntimeError):
    """The task could not be started (e.g. image not found); carries the exit code and diagnostics to record."""

    def __init__(self, exit_code: int, diagnostics: str):
        super().__init__(diagnostics)
        self.exit_code = exit_code
        self.diagnostics = diagnostics


class Runtime(abc.ABC):
    name: str
    view: TaskView = HOST
    """How its tasks see the job's files (``view.py``): at host paths (this default), or in a container through
    mounts, running as root there."""
    host_ip: str = LOOPBACK
    """The IP a task is reached at, known before it starts (``PAI_HOST_IP_*``, the task table): this host's
    loopback for the runtimes of this machine. A runtime whose tasks run on other nodes gives each task its
    node's IP when it runs (see ``runtime/slurm``)."""
    task_ports: Span | None = None
    """The range its tasks' ports come from (``taskPorts`` in cluster.yaml); None: any free port of this host."""
    local_gpus: bool = True
    """A task's GPU indices are this machine's, so the daemon's NVML samples them (charts, GPU-idle release). A
    runtime whose tasks run on other nodes says False: sampling here would report another machine's GPUs."""

    @abc.abstractmethod
    def start(self, spec: TaskSpec) -> TaskHandle:
        """Start the task and return at once (no waiting for it to run). Raises TaskStartError."""

    def start_quick(self, spec: TaskSpec) -> TaskHandle | None:
        """Start the task now if that takes no more than a few file operations (no fork, no engine call), from
        the event loop; None means "call start() in a worker thread". Raises TaskStartError. Default: None."""
        return None

    @abc.abstractmethod
    async def wait(self, handle: TaskHandle, task_dir: Path) -> TaskExit:
        """Resolve when the task has ended (its exit status read from ``task_dir``); works for a handle from before
        a daemon restart."""

    @abc.abstractmethod
    def stop(self, handle: TaskHandle, grace: float = 3.0, sig: int = signal.SIGTERM) -> None:
        """Signal the whole task (process group / container) with ``sig`` (SIGTERM; a preemption: the job's own
        signal), SIGKILL after ``grace`` seconds. Non-blocking."""

    @abc.abstractmethod
    def is_alive(self, handle: TaskHandle) -> bool:
        """True while the task (not a reused pid) still runs."""

    @abc.abstractmethod
    def remove(self, handle: TaskHandle) -> None:
        """Free what the task held (container, cgroup); its directory is the daemon's to delete."""

    def recover(self) -> list[TaskHandle]:
        """Tasks of this runtime still present (e.g. containers by label); default: none are discoverable."""
        return []

    @abc.abstractmethod
    def terminal_command(
        self, handle: TaskHandle, env: dict[str, str], cwd: str | None
    ) -> tuple[list[str], dict[str, str], str | None]:
        """(argv, env, cwd) of an interactive shell inside the task, to run under a pty."""

    @abc.abstractmethod
    def sample(self, handle: TaskHandle) -> TaskSample | None:
        """CPU seconds and memory of the task now, or None when it is gone."""

    def logs_dir(self, task_dir: Path) -> Path:
        """Where a task's shim writes its logs and exit status: the control part of the task directory, written by
        root from fds it opened before the command's privileges dropped (``taskdir``); a runtime whose shim runs
        inside the task (a container) names the task-writable directory it writes instead."""
        return Path(task_dir)

    def find(self, task_dir: str) -> TaskHandle | None:
        """The handle of a task whose start was not recorded (daemon killed mid-start), or None if it never ran."""
        return None

    def describe(self) -> str:
        return self.name

    def ports(self) -> PortAllocator:
        """Where the ports of this runtime's tasks come from. Default: free ports of this host (its tasks share
        its network), within ``task_ports`` when set. A runtime whose tasks have a network of their own (a pod's)
        supplies its own rule."""
        return PortAllocator(self.task_ports)

    def login_account(self, run_as: tuple[int, int] | None, owner: str) -> str:
        """The account ``ssh`` logs into a task as: the one the task runs as (``run_as``; None: ``owner``, the
        daemon's). A runtime whose tasks run as root in containers says root."""
        if run_as is None:
            return owner
        try:
            return pwd.getpwuid(run_as[0]).pw_name
        except KeyError:
            return str(run_as[0])

    def resources(self) -> tuple[int, int, int] | None:
        """CPUs, memory (MB) and GPUs of the machines a runtime's own scheduler places tasks on (a batch system's
        cluster): the daemon's capacity where no flag sets it. None: this machine's."""
        return None

    def nodes(self) -> list[Node] | None:
        """The machines tasks run on, when a runtime's own scheduler has several (blocking: ask off the event loop).
        None: this machine alone, with the daemon's capacity."""
        return None

    def listen_addresses(self) -> list[str]:
        """This host's addresses, besides loopback, at which the machines of ``nodes()`` reach it (another host's
        task calls the daemon's REST there: a JupyterHub user's server, docs/hub.md): this host's address on the
        route to each node (``reach.py``), never every interface. Blocking. Default: none (tasks run here)."""
        from .reach import toward

        return toward(n.address for n in self.nodes() or [])

    def begin(self) -> None:
        """The daemon answers requests now: background work of the runtime's own may start; default: none."""
        return None

    def close(self) -> None:
        """Free what the runtime holds for itself (not its tasks, which outlive the daemon); default: nothing."""
        return None


class Batch(abc.ABC):
    """A runtime that is a batch system supplies its scheduler by being a ``Batch`` too (Slurm's): the daemon then
    hands it every task of a job attempt at once, as soon as they wait, checks no capacity of its own, and the
    task runs once that scheduler places it (``core/launches.py``: ``Handed``). Every other runtime's tasks are
    placed by the daemon's own plan and run from their start (``Placed``)."""

    @abc.abstractmethod
    def start_job(self, specs: list[TaskSpec]) -> list[TaskHandle]:
        """Start these tasks of one job attempt together, in one allocation; one handle per spec, in order.
        Raises TaskStartError for all of them."""

    @abc.abstractmethod
    async def running(self, handle: TaskHandle, task_dir: Path, waiting: Callable[[str], None]) -> Where | None:
        """Resolve once a started task runs, with where (its node, its IP, the GPUs the scheduler gave it); None
        when it ended without running. While the job waits in the scheduler's queue, ``waiting`` is told why, in
        that scheduler's words."""

    async def end_allocation(self, handle: TaskHandle) -> str:
        """The daemon has the exit status of every task it knows in ``handle``'s allocation and records the last
        one's end after this returns. Where a task's exit status is a file the task can write while it runs on,
        make sure the allocation has ended (end it) and say so when that took ending it. Default: nothing."""
        return ""

    def reprioritise(self, handles: list[TaskHandle], priority: str | None) -> None:
        """A job already handed to the scheduler got a new priority class (None: OpenPAI's default): tell it."""
        return None

    def held(self, handle: TaskHandle) -> Held | None:
        """Where the scheduler holds the job of ``handle`` while it is pending there (its place in that
        scheduler's line, the start it expects), as the runtime last saw it, without asking (the queue's answer,
        docs/queue.md). None: not pending there, or not known."""
        return None


@dataclass(frozen=True)
class Held:
    """A job pending in a batch system's scheduler (``Runtime.held``): how many jobs that scheduler considers
    before it, and when it expects to start it (epoch s; None: it has no estimate, nothing bounds the start)."""

    ahead: int
    start_estimate: float | None = None


@dataclass
class TaskSample:
    """Resource use of a running task: CPU seconds used so far (all its processes) and resident memory."""

    cpu_seconds: float
    memory_bytes: int
