"""The Slurm runtime: the daemon as OpenPAI's REST front for a Slurm cluster (``pai cluster start --backend slurm``).

Each job attempt is one ``sbatch`` allocation sized to all its tasks (gang: all or nothing), with one
``srun --exact`` step per task role whose tasks are the role's instances (``batch.py``). Every task runs under
``wrapper.sh``: it publishes its node's IP on the job's directory (which the nodes share), waits for all tasks
of the attempt, exports ``PAI_HOST_IP_*`` and the host lists, and runs the commands through the same shim as the
Docker runtime (bash errexit/nounset/pipefail; logs and ``exit_code`` in the task's ``run/``, read with safeio).
Slurm schedules: the daemon submits at once and checks no capacity; GPUs are Slurm's gres
(``CUDA_VISIBLE_DEVICES`` from Slurm); a virtual cluster is a partition; the max run time is ``--time`` too.

Why the CLI (``sbatch --parsable``, ``squeue -o``, ``scancel``) and not slurmrestd: the commands are on every
Slurm client machine and find the cluster as users' own commands do (``SLURM_CONF`` or the default slurm.conf,
munge); slurmrestd is a separate daemon with its own JWT or socket auth that many sites do not run, and its API
version changes with each Slurm release (v0.0.38 in 22.05). ``--json`` output of 22.05's squeue costs more to
produce and parse than the four columns the daemon needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ....common import safeio
from .. import taskdir
from ..base import (
    EXIT_START_FAILED,
    Batch,
    Held,
    Node,
    Runtime,
    TaskExit,
    TaskHandle,
    TaskSample,
    TaskSpec,
    TaskStartError,
    Where,
)
from ..hostenv import host_env
from ..registry import Options
from ..shim import SHIM_SH
from . import batch
from .accounting import Accounting, preempt_time, preempted
from .commands import (
    FINAL,
    NODE_FORMAT,
    Jobs,
    JobState,
    SlurmError,
    available,
    ended_without_status,
    node_table,
    parse_nodes,
    run,
)
from .placed import placement

log = logging.getLogger("pai_jupyter.cluster")
WRAPPER = Path(__file__).with_name("wrapper.sh")
ENV_FILE = "slurm.env"  # in the control part: root's, readable by the task's group only (it holds the secrets)
SUBMITTED = "slurm.name"  # in the control part: the Slurm job name, written before sbatch
USAGE = "usage"  # in run/: "cpu_seconds resident_bytes" of the task's process group, written by the wrapper
ADDRS_S = 60.0
SLURM_TASK_PORTS = (20000, 29999)
PLACEMENT_WAIT_S = 10.0  # how long a task Slurm runs may take to write its placement before Slurm's word stands in
PENDING_LOOK_S = 0.1
LOOK_S = 0.05  # how often a waiter reads its task's files (squeue runs at most every POLL_S, shared by all)
SETTLE_S = 5.0  # how long a job whose tasks all have their exit status may take to end before it is cancelled
ENDED_S = 60.0  # how long a cancelled job may take to end (the cluster's KillWait) before its end is recorded anyway
SLURM_SETS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")  # per task, from the job's gres


class SlurmRuntime(Runtime, Batch):
    """Slurm places whole jobs itself (``Batch``): the daemon hands it each attempt at once."""

    name = "slurm"
    local_gpus = False  # a task's GPUs are its node's (CUDA_VISIBLE_DEVICES there), not the daemon's
    host_ip = ""  # known once the task runs on its node: the wrapper exports it (and writes run/placement)
    # the nodes' own connections take local ports from the ephemeral range (32768-60999), which this host cannot
    # see: the tasks' ports stay below it (taskPorts in cluster.yaml sets the site's)
    task_ports = SLURM_TASK_PORTS

    def __init__(self) -> None:
        self.jobs = Jobs()
        # what sbatch passes on to the job: a plain system environment (never the daemon's, with its venv first)
        # and how Slurm's commands on the nodes find the cluster
        conf = {k: v for k, v in os.environ.items() if k in ("SLURM_CONF", "MUNGE_SOCKET")}
        self._submit_env = host_env(conf)
        self._addrs, self._addrs_at = "", -ADDRS_S
        self._accounting: Accounting | None = None

    @property
    def accounting(self) -> Accounting:
        """The cluster's QOS for the priority classes and whether it preempts, asked at the first submit."""
        if self._accounting is None:
            self._accounting = Accounting.ask(self._submit_env)
        return self._accounting

    def node_addrs(self) -> str:
        """``node=NodeAddr ...`` of the cluster's nodes (sinfo, at most once a minute): a task's wrapper finds its
        IP there instead of asking slurmctld (``scontrol show node``, its fallback) once per task."""
        now = time.monotonic()
        if now - self._addrs_at >= ADDRS_S:
            try:
                out = run(["sinfo", "-h", "-N", "-o", "%N=%o"], env=self._submit_env)
                self._addrs = " ".join(sorted(set(out.split())))
            except SlurmError:
                self._addrs = ""
            self._addrs_at = now
        return self._addrs

    def _addr_of(self, node: str) -> str | None:
        """The NodeAddr of ``node`` as sinfo lists it; None for a node it does not list."""
        return dict(a.split("=", 1) for a in self.node_addrs().split() if "=" in a).get(node)

    def _placed(self, task_dir: Path) -> Where | None:
        """The task's ``run/placement`` when it names a node of the cluster and that node's own address (the task's
        account can write the file: a forged IP would send the daemon's probes and the proxy elsewhere); else None.
        Unchecked only while sinfo lists no node at all."""
        where = placement(task_dir)
        if where is None or not self.node_addrs() or self._addr_of(where.node) == where.ip:
            return where
        return None

    def _slurms_word(self, seen: JobState) -> Where:
        """Where Slurm runs a task whose placement is missing or false: its job's node when it has one, else the
        job's node list and no IP (which of them runs this task Slurm does not say per task)."""
        single = seen.nodes and not any(c in seen.nodes for c in "[,")
        return Where(node=seen.nodes, ip=(self._addr_of(seen.nodes) or "") if single else "")

    def describe(self) -> str:
        return f"slurm ({os.environ.get('SLURM_CONF') or 'the default slurm.conf'})"

    def reprioritise(self, handles: list[TaskHandle], priority: str | None) -> None:
        """The job's new class as its Slurm job's nice value (``scontrol update``): Slurm reorders its queue."""
        qos = self.accounting.qos_of(priority)
        for job_id in sorted({h.id for h in handles}):
            to = f"QOS={qos}" if qos else f"Nice={batch.nice(priority)}"
            try:
                run(["scontrol", "update", f"JobId={job_id}", to], env=self._submit_env)
            except SlurmError as exc:  # ended meanwhile: nothing to reorder
                log.info("Slurm job %s kept its priority: %s", job_id, exc)

    def held(self, handle: TaskHandle) -> Held | None:
        """A pending Slurm job's place in its partition's line and Slurm's expected start (squeue's ``%S``, what
        ``squeue --start`` shows: planned by the backfill scheduler; later jobs of higher priority may push it
        back, jobs that end early bring it forward), from the squeue answer the job's waiter keeps fresh."""
        found = self.jobs.seen(handle.id)
        if found is None or found[0].state != "PENDING":
            return None
        return Held(found[1], found[0].start)

    def resources(self) -> tuple[int, int, int] | None:
        """The Slurm cluster's nodes, summed (sinfo): what a job may at most ask for, checked at submit."""
        try:
            total = parse_nodes(run(["sinfo", "-h", "-N", "-o", "%N %c %m %G"], env=self._submit_env))
        except SlurmError:
            return None
        return total if total[0] else None

    def nodes(self) -> list[Node] | None:
        """The Slurm cluster's nodes (sinfo), each with its state: one that does not take tasks is not ready."""
        try:
            return node_table(run(["sinfo", "-h", "-N", "-o", NODE_FORMAT], env=self._submit_env)) or None
        except SlurmError:
            return None

    # ---- start ---------------------------------------------------------------------------------------------------
    def start(self, spec: TaskSpec) -> TaskHandle:
        return self.start_job([spec])[0]

    def start_job(self, specs: list[TaskSpec]) -> list[TaskHandle]:
        adir = self._attempt_dir(specs)
        for spec in specs:
            self._prepare(spec)
        total = int(specs[0].env.get("PAI_JOB_TASK_COUNT") or len(specs))
        key = specs[0].key.replace("~", "-")
        script = adir / f"batch-{key}.sh"
        with contextlib.suppress(FileNotFoundError):
            script.unlink()
        taskdir.write_copy(adir, script.name, batch.script(specs, adir, total))
        name = f"pai-{key}"  # unique per submission: a daemon killed before it read the id finds the job by it
        for spec in specs:
            taskdir.write_private(spec.task_dir / SUBMITTED, name)
        first = specs[0]
        self.accounting.associate(first.run_as[0] if first.run_as else None, self._submit_env)
        qos = self.accounting.sbatch_args(first.priority, first.env, len(specs))
        try:
            out = run([*batch.sbatch_args(specs, adir, name, qos), str(script)], env=self._submit_env)
        except SlurmError as exc:
            raise TaskStartError(EXIT_START_FAILED, f"Slurm refused the job: {exc}") from exc
        job_id = out.strip().split(";")[0]
        handles = []
        try:
            for spec in specs:
                info = {"role": spec.role, "run_as": spec.run_as, "task_dir": str(spec.task_dir)}
                info |= {"qos": self.accounting.qos_of(spec.priority)} if qos else {}
                handle = TaskHandle(runtime=self.name, id=job_id, info=info)
                taskdir.write_handle(spec.task_dir, handle.to_dict())
                handles.append(handle)
        except OSError:  # (a full disk): the daemon starts it again, so this one must not run on beside that
            self.jobs.cancel(job_id)
            raise
        return handles

    def _attempt_dir(self, specs: Sequence[TaskSpec]) -> Path:
        """``slurm-a<N>/`` of the job: the batch script, wrapper and shim (root's), ``rdv/`` and ``log/`` (the
        task account's: the rendezvous and Slurm's own output of the batch script)."""
        first = specs[0]
        adir = first.task_dir.parent / f"slurm-a{first.job_attempt}"
        adir.mkdir(mode=0o750, exist_ok=True)
        taskdir.share(adir, first.run_as)
        for name, text in (("wrapper.sh", WRAPPER.read_text()), ("shim.sh", SHIM_SH.read_text())):
            # a retried task's start must not rewrite what its running siblings' bash still reads as it goes
            if safeio.read_text_beneath(adir, name, 1 << 20) != text:
                taskdir.write_copy(adir, name, text)
        for part in ("rdv", "log"):
            (adir / part).mkdir(mode=0o700, exist_ok=True)
            taskdir.give(adir / part, first.run_as)
        return adir

    def _prepare(self, spec: TaskSpec) -> None:
        td = spec.task_dir
        td.mkdir(mode=0o750, exist_ok=True)
        taskdir.share(td, spec.run_as)
        taskdir.clear_stale(td)
        shutil.rmtree(td / taskdir.RUN, ignore_errors=True)  # an earlier start's (fd-based: no link followed)
        taskdir.make_task_parts(td, spec.run_as)
        taskdir.write_command(td, spec.disk_script())
        if spec.image:
            taskdir.add_notice(
                td,
                f"[pai_jupyter] the image {spec.image} is recorded but not used: the Slurm runtime runs the "
                "commands on the nodes' own system, as the process runtime does\n",
            )
        env = {k: v for k, v in host_env(spec.env).items() if k not in SLURM_SETS}
        env[taskdir.SCRIPT_ENV] = spec.script
        env["PAI_JUPYTER_WORKDIR"] = spec.work_dir or str(td / taskdir.WORK)
        env["PAI_JUPYTER_NODE_ADDRS"] = self.node_addrs()
        path = td / ENV_FILE
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            if spec.run_as is not None:
                os.fchown(fd, -1, spec.run_as[1])
                os.fchmod(fd, 0o640)
            os.write(fd, b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items() if "\0" not in k + v))
        finally:
            os.close(fd)

    # ---- wait, stop, liveness ------------------------------------------------------------------------------------
    def logs_dir(self, task_dir: Path) -> Path:
        return Path(task_dir) / taskdir.RUN  # the wrapper's shim writes them as the task's account: safeio

    async def running(self, handle: TaskHandle, task_dir: Path, waiting: Callable[[str], None]) -> Where | None:
        """Where the task runs once its wrapper has started on a node (its ``run/placement``, checked against
        Slurm's nodes; Slurm's own word when the task ran PLACEMENT_WAIT_S without a true one); while Slurm holds
        the job pending, ``waiting`` hears Slurm's reason and the job's place in its partition's queue. A task
        placed already (a restarted daemon) is not read again: its file is the task's to change since."""
        placed = handle.info.get("placed")
        if placed:
            return Where(node=placed["node"], ip=placed["ip"])
        told, loop = None, asyncio.get_running_loop()
        began, ran = loop.time(), None
        while True:
            where = self._placed(task_dir)
            if where is not None:
                return where
            seen = await self.jobs.get(handle.id)
            if seen is None and loop.time() - began < 3.0:  # squeue read before the job was submitted
                await asyncio.sleep(LOOK_S)
                continue
            if seen is None or seen.state in FINAL:
                return self._placed(task_dir)
            if seen.state == "PENDING":
                why = self.jobs.why(handle.id)
                if why != told:
                    waiting(why)
                    told = why
            elif seen.state == "RUNNING":
                ran = ran or loop.time()
                if loop.time() - ran > PLACEMENT_WAIT_S:
                    log.warning("task %s wrote no true run/placement: Slurm's word stands in", task_dir)
                    return self._slurms_word(seen)
            # its placement file tells first that it runs; a hundred pending jobs' waiters look less often
            await asyncio.sleep(PENDING_LOOK_S if seen.state == "PENDING" else LOOK_S)

    async def wait(self, handle: TaskHandle, task_dir: Path) -> TaskExit:
        gone_at = None
        while True:
            code = taskdir.exit_code(self.logs_dir(task_dir))
            if code is not None:
                why = await self.jobs.why_signalled(handle.id) if code > 128 else ""
                sig = code - 128 if 128 < code <= 128 + 64 else None
                return TaskExit(code, why, signal=sig, preempted=await self._preempted(handle))
            seen = await self.jobs.get(handle.id)
            if seen is None or seen.state in FINAL:
                # the shim's exit_code may come a moment after Slurm's end (a shared disk): wait a little for it
                loop = asyncio.get_running_loop()
                gone_at = gone_at or loop.time()
                if loop.time() - gone_at > 2.0:
                    ended = ended_without_status(handle.id, seen)
                    ended.preempted = await self._preempted(handle) or ended.preempted
                    return ended
            await asyncio.sleep(LOOK_S)

    async def end_allocation(self, handle: TaskHandle) -> str:
        """Every task the daemon knows in this Slurm job has its exit status; but ``run/exit_code`` is the task
        account's file, so a task may write it and run on. The job must end by itself within SETTLE_S (Slurm says
        COMPLETING or a final state); else it is cancelled (scancel) and its end awaited, so nothing of it runs on
        past the end the daemon records: not past its max run time, nor after a stop."""
        if await self.jobs.ended(handle.id, SETTLE_S, ("COMPLETING",)):
            return ""
        log.warning("Slurm job %s ran on after all its tasks wrote their exit status: cancelling it", handle.id)
        self.jobs.cancel(handle.id)
        if not await self.jobs.ended(handle.id, ENDED_S):
            log.warning("Slurm job %s cancelled, but Slurm has not ended it yet", handle.id)
        return f"Slurm job {handle.id} still ran {SETTLE_S:g} s after its tasks' exit status: cancelled"

    async def _preempted(self, handle: TaskHandle) -> str | None:
        """Whether Slurm preempted the task's job (its PreemptTime): also when the task ended by itself in its
        grace, as it should (accounting.py). Asked only of a job submitted with a class's QOS."""
        if "qos" not in handle.info:
            return None
        when = await preempt_time(handle.id)
        return preempted(handle.id, when, handle.info["qos"]) if when else None

    def stop(self, handle: TaskHandle, grace: float = 3.0, sig: int = signal.SIGTERM) -> None:
        """``scancel`` the task's Slurm job (all its tasks end with it; the grace is the cluster's KillWait)."""
        self.jobs.cancel(handle.id)

    def is_alive(self, handle: TaskHandle) -> bool:
        seen = self.jobs.now(handle.id)
        return seen is not None and seen.state not in FINAL

    def remove(self, handle: TaskHandle) -> None:
        return None  # Slurm frees the allocation itself; the directories are the daemon's

    def find(self, task_dir: str) -> TaskHandle | None:
        """The handle written after sbatch, else the job submitted under the name written before it."""
        written = taskdir.read_handle(Path(task_dir))
        if written:
            return TaskHandle.from_dict(written)
        name = safeio.read_text_beneath(Path(task_dir), SUBMITTED, 256)
        if not name:
            return None
        try:
            found = run(["squeue", "-h", "-t", "all", "-n", name.strip(), "-o", "%A"]).split()
        except SlurmError:
            return None
        return TaskHandle(runtime=self.name, id=found[0], info={}) if found else None

    def terminal_command(
        self, handle: TaskHandle, env: dict[str, str], cwd: str | None
    ) -> tuple[list[str], dict[str, str], str | None]:
        """A shell in the task's allocation on its node: an ``srun --overlap --pty`` step of its Slurm job, run as
        the task's account (``setpriv``, then Slurm's own credential: munge says who asks), so it ends with the
        job and holds nothing of the task's resources."""
        node = (handle.info.get("placed") or {}).get("node")
        if not node or "run_as" not in handle.info:
            raise RuntimeError("this task has no recorded node yet (or was started by an older version)")
        run_as = handle.info["run_as"]
        who = ["setpriv", f"--reuid={run_as[0]}", f"--regid={run_as[1]}", "--clear-groups"] if run_as else []
        step = ["srun", f"--jobid={handle.id}", "--overlap", f"--nodelist={node}", "-N1", "-n1", "--mem=0", "--pty"]
        if cwd:
            step.append(f"--chdir={cwd}")
        shell_env = {**self._submit_env, **host_env(env), "TERM": "xterm-256color"}  # (how srun finds the cluster)
        return [*who, *step, "/bin/sh", "-i"], shell_env, None

    def sample(self, handle: TaskHandle) -> TaskSample | None:
        """What the task's wrapper last wrote to ``run/usage`` on its node (every 2 s: CPU seconds, resident
        bytes), read without following a link: it is the task account's file."""
        task_dir = handle.info.get("task_dir")
        text = safeio.read_text_beneath(Path(task_dir), f"{taskdir.RUN}/{USAGE}", 128) if task_dir else None
        parts = (text or "").split()
        try:  # written by the task's account: anything may be there ("nan", "-1", "inf" would reach the charts)
            cpu, memory = float(parts[0]), int(parts[1])
        except (ValueError, IndexError):
            return None
        return TaskSample(cpu, memory) if len(parts) == 2 and math.isfinite(cpu) and cpu >= 0 <= memory else None


def make(options: Options) -> Runtime:
    """The Slurm runtime, once Slurm's commands answer (they find the cluster through SLURM_CONF or slurm.conf)."""
    if not available():
        raise SystemExit("pai cluster: --backend slurm needs Slurm's commands (sbatch, squeue, scancel) on PATH")
    try:
        run(["squeue", "-h", "-o", "%A"], timeout=15)
    except SlurmError as exc:
        raise SystemExit(f"pai cluster: --backend slurm: no Slurm controller answers: {exc}") from None
    return SlurmRuntime()
