"""Slurm's own commands, as the runtime uses them: ``sbatch --parsable`` to submit, ``squeue`` (one call for all
jobs, shared by every waiter) for states and pending reasons, ``scancel`` to stop. They find the cluster the way
they always do (``SLURM_CONF``, else the default slurm.conf)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

from ..base import EXIT_LOST, Node, TaskExit

FINAL = frozenset(
    ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE")
)
"""Slurm job states after which nothing of the job runs."""
WHY = {
    "CANCELLED": "cancelled in Slurm (scancel)",
    "TIMEOUT": "Slurm ended the job at its time limit (--time)",
    "NODE_FAIL": "a node of the job's allocation failed",
    "OUT_OF_MEMORY": "Slurm ended the job: out of memory",
    "PREEMPTED": "preempted by Slurm",
    "BOOT_FAIL": "a node of the job's allocation failed to boot",
    "DEADLINE": "Slurm ended the job at its deadline",
}
"""What a final state says when the task itself left no exit status."""
POLL_S = 0.5
LOOK_S = 0.05  # (``ended``: how often it asks; squeue itself runs at most every POLL_S)
FORMAT = "%A|%T|%r|%N|%P|%Q|%S"  # %S: a pending job's expected start (``squeue --start``'s START_TIME)
GLOSS = {
    "Resources": "the nodes lack the free CPUs, memory or GPUs it asks for",
    "Priority": "jobs of higher priority go first",
    "PartitionTimeLimit": "its max run time is over the partition's limit",
    "ReqNodeNotAvail": "a node it needs is down or reserved",
}
"""A few words on Slurm's commonest pending reasons (squeue's %r)."""


class SlurmError(RuntimeError):
    pass


def run(argv: list[str], stdin: str | None = None, timeout: float = 30.0, env: dict[str, str] | None = None) -> str:
    """Run a Slurm command and return its stdout; SlurmError carries its stderr."""
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{argv[0]}: {exc}") from exc
    if done.returncode != 0:
        raise SlurmError(f"{' '.join(argv[:2])}: {done.stderr.strip() or f'exit status {done.returncode}'}")
    return done.stdout


def available() -> bool:
    return all(shutil.which(c) for c in ("sbatch", "squeue", "scancel"))


@dataclass(frozen=True)
class JobState:
    state: str  # Slurm's, e.g. PENDING, RUNNING, COMPLETED
    reason: str  # Slurm's pending / end reason, e.g. Resources, Priority, None
    nodes: str
    partition: str = ""
    priority: int = 0
    start: float | None = None  # a pending job's expected start (epoch s), once Slurm's backfill planned one


def expected_start(text: str) -> float | None:
    """squeue's ``%S`` of a pending job (``2026-05-01T12:03:05``, in the local time zone squeue printed it in) as
    epoch seconds; None for ``N/A``, ``Unknown`` (nothing bounds its start: the jobs it waits for have no time
    limit) or anything else."""
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except (ValueError, OverflowError):
        return None


def parse_squeue(text: str) -> dict[str, JobState]:
    """``squeue -h -t all -o FORMAT`` lines by job id."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 7:
            prio = int(parts[5]) if parts[5].isdigit() else 0
            start = expected_start(parts[6]) if parts[1] == "PENDING" else None
            out[parts[0]] = JobState(parts[1], parts[2], parts[3], parts[4], prio, start)
    return out


def ahead_of(job_id: str, seen: dict[str, JobState]) -> int:
    """How many pending jobs of its partition Slurm will consider before this one (higher priority, or the same
    priority and submitted earlier: Slurm's own order)."""
    me = seen[job_id]
    key = (-me.priority, int(job_id))
    return sum(
        1
        for jid, j in seen.items()
        if j.state == "PENDING" and j.partition == me.partition and (-j.priority, int(jid)) < key
    )


def why_pending(job_id: str, seen: dict[str, JobState]) -> str:
    """A pending job's "why waiting": Slurm's reason and its place in its partition's line (``ahead_of``)."""
    me = seen[job_id]
    ahead = ahead_of(job_id, seen)
    gloss = GLOSS.get(me.reason)
    reason = f"{me.reason}: {gloss}" if gloss else me.reason
    if me.reason in ("None", ""):
        reason = "not yet weighed by Slurm's scheduler"
    jobs = f"{ahead} job{'s' * (ahead != 1)}"
    return f"pending in Slurm as job {job_id} ({reason}); {jobs} ahead in partition {me.partition!r}"


def ended_without_status(job_id: str, seen: JobState | None) -> TaskExit:
    """A task whose Slurm job ended (or is forgotten) before it wrote its exit status, in Slurm's words."""
    if seen is None:
        return TaskExit(EXIT_LOST, f"Slurm no longer knows job {job_id} and the task left no exit status")
    why = WHY.get(seen.state, f"Slurm job {job_id} ended {seen.state}")
    if seen.reason and seen.reason != "None":
        why += f" ({seen.reason})"
    if seen.state == "CANCELLED":
        return TaskExit(exit_code=143, diagnostics=why, signal=15)
    lost = TaskExit(EXIT_LOST, f"{why}; the task left no exit status", oom=seen.state == "OUT_OF_MEMORY")
    lost.preempted = why if seen.state == "PREEMPTED" else None
    return lost


class Jobs:
    """Slurm's view of every job, read with one ``squeue`` at most every POLL_S seconds whoever asks."""

    def __init__(self) -> None:
        self._seen: dict[str, JobState] = {}
        self._at = self._seen_at = 0.0  # when squeue last ran; when the last answer that came back was asked
        self._lock = asyncio.Lock()
        self._cancelled: dict[str, float] = {}

    async def get(self, job_id: str) -> JobState | None:
        """The job's state now (None: Slurm no longer knows it)."""
        async with self._lock:
            if time.monotonic() - self._at >= POLL_S:
                asked = time.monotonic()
                proc = await asyncio.create_subprocess_exec(
                    "squeue", "-h", "-t", "all", "-o", FORMAT, stdout=asyncio.subprocess.PIPE
                )
                out, _ = await proc.communicate()
                if proc.returncode == 0:  # slurmctld away for a moment (a restart): keep what was seen
                    self._seen, self._seen_at = parse_squeue(out.decode()), asked
                self._at = time.monotonic()
        return self._seen.get(job_id)

    async def ended(self, job_id: str, within: float, ending: tuple[str, ...] = ()) -> bool:
        """Whether Slurm says within ``within`` seconds that the job ended (or is in one of the ``ending`` states).
        A job squeue does not list has ended only if it was asked after this began: one submitted a moment ago may
        be missing from an answer given before (a task that wrote its exit status at once)."""
        loop = asyncio.get_running_loop()
        since, until = time.monotonic(), loop.time() + within
        seen = await self._one(job_id)  # asked now, not the shared answer of up to POLL_S ago: its tasks just ended
        if seen is not None and (seen.state in FINAL or seen.state in ending):
            return True
        while True:
            seen = await self.get(job_id)
            if seen is None and self._seen_at >= since:
                return True
            if seen is not None and (seen.state in FINAL or seen.state in ending):
                return True
            if loop.time() >= until:
                return False
            await asyncio.sleep(LOOK_S)

    async def why_signalled(self, job_id: str) -> str:
        """A task ended by a signal: what Slurm says of its job (a node failed, the time limit), if anything."""
        loop = asyncio.get_running_loop()
        until = loop.time() + 3.0  # Slurm records the job's end a moment after its steps were signalled
        while loop.time() < until:
            seen = await self.get(job_id)
            if seen is None or (seen.state in FINAL and seen.state not in WHY):
                return ""
            if seen.state in WHY:
                reason = f" ({seen.reason})" if seen.reason not in ("", "None") else ""
                return f"{WHY[seen.state]}{reason}"
            await asyncio.sleep(LOOK_S)
        return ""

    def seen(self, job_id: str) -> tuple[JobState, int] | None:
        """The job as the last ``get`` saw it and, pending, its place in its partition's line (no squeue of its
        own: the waiters' ``get`` keeps the answer fresh while any job waits)."""
        me = self._seen.get(job_id)
        if me is None:
            return None
        return me, ahead_of(job_id, self._seen) if me.state == "PENDING" else 0

    async def _one(self, job_id: str) -> JobState | None:
        """This job's state asked of Slurm now (one ``squeue -j``); None when the answer says nothing of it."""
        proc = await asyncio.create_subprocess_exec(
            "squeue",
            "-h",
            "-t",
            "all",
            "-j",
            job_id,
            "-o",
            FORMAT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await proc.communicate()
        return parse_squeue(out.decode()).get(job_id) if proc.returncode == 0 else None

    def why(self, job_id: str) -> str:
        """Why a pending job (seen by the last ``get``) waits, in Slurm's words, with its place in the queue."""
        return why_pending(job_id, self._seen) if job_id in self._seen else "pending in Slurm"

    def now(self, job_id: str) -> JobState | None:
        """The job's state, asked of Slurm now (blocking: for the daemon's start-up checks)."""
        try:
            return parse_squeue(run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", FORMAT])).get(job_id)
        except SlurmError:
            return None

    def cancel(self, job_id: str) -> None:
        """``scancel`` the job once (each of its tasks asks), in the background: Slurm signals its steps (SIGTERM,
        then SIGKILL after the cluster's KillWait)."""
        now = time.monotonic()
        if now - self._cancelled.get(job_id, -60.0) < 30:
            return
        self._cancelled[job_id] = now
        threading.Thread(target=lambda: subprocess.run(["scancel", job_id], capture_output=True), daemon=True).start()


GRES_GPU = re.compile(r"gpu(?::[^:,()]+)?:(\d+)")


NODE_FORMAT = "%N %c %m %G %T %o"
# sinfo's %T of a node that takes tasks; with a flag (``idle*``: not responding, ``idle~``: powered off) it does not
TAKES_TASKS = {"idle", "mixed", "allocated", "completing"}


def parse_nodes(text: str) -> tuple[int, int, int]:
    """CPUs, memory (MB) and GPUs of every node in ``sinfo -h -N -o '%N %c %m %G'`` (a node listed once per
    partition is counted once)."""
    seen = node_table(text)
    return (sum(n.cpu for n in seen), sum(n.memory_mb for n in seen), sum(n.gpu for n in seen))


def node_table(text: str) -> list[Node]:
    """The nodes in ``sinfo -h -N -o NODE_FORMAT`` (or its first four columns), each once."""
    seen: dict[str, Node] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].isdigit() and parts[2].isdigit():
            gpus = sum(int(n) for n in GRES_GPU.findall(parts[3])) if len(parts) > 3 else 0
            state = parts[4].lower() if len(parts) > 4 else "idle"
            address = parts[5] if len(parts) > 5 else parts[0]
            ready = state in TAKES_TASKS
            seen[parts[0]] = Node(parts[0], address, int(parts[1]), int(parts[2]), gpus, ready)
    return list(seen.values())
