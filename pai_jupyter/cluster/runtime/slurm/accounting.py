"""Priority classes, fair share and preemption on a Slurm cluster with accounting (slurmdbd): what the runtime asks
of the cluster once, the users' associations it makes, and how it tells a preempted job (docs/slurm.md,
"Preemption and fair share on Slurm").

Slurm preempts, not the daemon: a class is a QOS of the same name (``--qos=oppo``), whose ``Preempt`` list and
``GraceTime`` the admin sets (``sacctmgr``); the job's own signal reaches it at the start of the grace
(``--signal``, with ``SlurmctldParameters=preempt_send_user_signal``; else Slurm sends SIGTERM). The daemon's jobs
stay ``--no-requeue`` under any ``PreemptMode``: Slurm then cancels a preempted one instead of requeueing it (it
says "had to be killed"), so one attempt is one Slurm job and the daemon queues the next attempt itself. A job
that ends on its own in the grace (it saved its checkpoint) ends COMPLETED or FAILED: what marks it preempted is
its ``PreemptTime``, which Slurm sets at preemption and keeps."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import pwd
from dataclasses import dataclass, field

from .commands import SlurmError, run

log = logging.getLogger("pai_jupyter.cluster")
CLASSES = ("crit", "prod", "test", "oppo")  # core/queue.py's priority classes; test is OpenPAI's default
ACCOUNT = "pai"  # the Slurm account the runtime puts a user without any association under
SIGNALS = ("TERM", "INT", "USR1", "USR2", "HUP")  # the job protocol's extras.preemption.signal
MAX_SIGNAL_S = 0xFFFF  # sbatch --signal's largest @time


@dataclass
class Accounting:
    """What the cluster's configuration says, asked once (``scontrol show config``, ``sacctmgr show qos``)."""

    cluster: str = ""
    qos: frozenset[str] = frozenset()  # the priority classes that are QOS of the cluster
    preempts: bool = False  # PreemptType is not preempt/none
    associated: set[str] = field(default_factory=set)  # users seen with an association

    @classmethod
    def ask(cls, env: dict[str, str]) -> Accounting:
        """Without slurmdbd accounting (or where Slurm does not answer) no class is a QOS: ``--nice`` then."""
        try:
            lines = run(["scontrol", "show", "config"], env=env).splitlines()
            conf = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in lines)}
            if conf.get("AccountingStorageType") != "accounting_storage/slurmdbd":
                return cls()
            names = run(["sacctmgr", "-n", "-P", "show", "qos", "format=name"], env=env).split()
        except SlurmError as exc:
            log.warning("Slurm's accounting did not answer (the classes go to Slurm as --nice): %s", exc)
            return cls()
        qos = frozenset(c for c in CLASSES if c in names)
        return cls(conf.get("ClusterName", ""), qos, conf.get("PreemptType", "preempt/none") != "preempt/none")

    def qos_of(self, priority: str | None) -> str | None:
        cls = priority or "test"
        return cls if cls in self.qos else None

    def associate(self, uid: int | None, env: dict[str, str]) -> None:
        """Make sure the account a job runs as has an association on the cluster (fair share is per association,
        and a cluster that enforces associations refuses a job without one): one under the account ``pai`` for
        a user that has none, made once (``sacctmgr``: the daemon must be Slurm's admin, root or SlurmUser). A
        user that has one keeps it and its QOS list as the admin set them. Failing, sbatch says why."""
        try:
            user = pwd.getpwuid(os.getuid() if uid is None else uid).pw_name
        except KeyError:
            return
        if user in self.associated or not self.qos:
            return
        where = [f"cluster={self.cluster}"] if self.cluster else []
        try:
            have = ["sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={user}", *where, "format=account"]
            if not run(have, env=env).split():
                if not run(["sacctmgr", "-n", "-P", "show", "account", ACCOUNT, "format=account"], env=env).split():
                    run(["sacctmgr", "-i", "add", "account", ACCOUNT, *where, "Description=pai_jupyter users"], env=env)
                run(["sacctmgr", "-i", "add", "user", user, f"account={ACCOUNT}", *where], env=env)
                log.info("Slurm: user %s associated with account %s", user, ACCOUNT)
        except SlurmError as exc:
            log.warning("Slurm: no association made for %s: %s", user, exc)
            return
        self.associated.add(user)

    def sbatch_args(self, priority: str | None, env: dict[str, str], tasks: int) -> list[str]:
        """``--qos`` of the job's class and its preemption signal at the start of the grace (``B:`` the batch
        shell, which is a one-task job's wrapper; else every step's tasks); ``--nice`` is the caller's without."""
        qos = self.qos_of(priority)
        if qos is None:
            return []
        args = [f"--qos={qos}"]
        sig = env.get("PAI_PREEMPT_SIGNAL", "TERM")
        if self.preempts and sig in SIGNALS:
            try:
                grace = float(env.get("PAI_PREEMPT_GRACE_SECONDS", "30"))
            except ValueError:
                grace = 30.0
            when = min(max(math.ceil(grace), 1) if math.isfinite(grace) else 30, MAX_SIGNAL_S)
            args.append(f"--signal={'B:' if tasks == 1 else ''}{sig}@{when}")
        return args


async def preempt_time(job_id: str) -> str | None:
    """When Slurm preempted the job (squeue's PreemptTime), or None: never, or Slurm no longer knows the job."""
    proc = await asyncio.create_subprocess_exec(
        "squeue", "-h", "-t", "all", "-j", job_id, "-O", "PreemptTime",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await proc.communicate()
    when = out.decode().strip()
    return when if proc.returncode == 0 and when[:1].isdigit() else None


def preempted(job_id: str, when: str, qos: str | None) -> str:
    """The TaskExit's ``preempted``: in Slurm's words as far as it gives them (it does not name the preemptor)."""
    of = f" of QOS {qos}" if qos else ""
    return f"preempted by Slurm: a job of a QOS that preempts it needed the resources of job {job_id}{of} ({when})"
