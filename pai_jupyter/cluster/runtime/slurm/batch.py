"""One job attempt's tasks as one Slurm allocation: the batch script (one ``srun --exact`` step per task role,
instances = tasks) and the ``sbatch`` options that size the allocation to all of them (all or nothing).

Each task slot of the allocation is the largest task's size (CPUs, memory, GPUs): any role's task fits any slot,
so the steps always place; a job whose roles differ in size holds a little more than their sum while it runs.
Heterogeneous jobs would size each role exactly, but in Slurm 22.05 their components were never placed on a
shared node and stayed pending (measured; README, "Pointing the workbench at a Slurm cluster")."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from pathlib import Path

from ..base import TaskSpec

GPU_VARS = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
"""What Slurm's gres sets for a step's GPUs."""
NICE = {"crit": -11000, "prod": -9000, "test": 0, "oppo": 1100}
"""A priority class as Slurm's ``--nice`` (lower runs first): the daemon's own queue ranks the classes 120, 100, 10
and -1 (core/queue.py) with OpenPAI's default as test; Slurm weighs them instead of the daemon. Kept well under
65535: priority/basic starts jobs at 2^32 - 65537 and a larger negative nice wrapped round to a tiny priority
(measured on 22.05). Slurm weighs them instead of the daemon."""


def nice(priority: str | None) -> int:
    return NICE.get(priority or "test", 0)


def sbatch_args(specs: Sequence[TaskSpec], adir: Path, name: str, qos: Sequence[str] = ()) -> list[str]:
    """``qos``: the class's ``--qos`` and preemption ``--signal`` (accounting.py), which replace ``--nice``."""
    cpu = max(max(s.cpu for s in specs), 1)
    mem_per_cpu = max(math.ceil(max(s.memory_mb for s in specs) / cpu), 1)
    gpu = max(len(s.gpus) or s.gpu_count for s in specs)
    first = specs[0]
    args = [
        "sbatch",
        "--parsable",
        # a node failure ends the attempt; the daemon retries (jobRetryCount), Slurm must not rerun it; and a
        # preemption under PreemptMode=REQUEUE cancels it, so the daemon queues the next attempt (accounting.py)
        "--no-requeue",
        f"--job-name={name}",
        f"--ntasks={len(specs)}",
        f"--cpus-per-task={cpu}",
        f"--mem-per-cpu={mem_per_cpu}",
        f"--chdir={adir}",
        f"--output={adir / 'log'}/batch-%j.out",
    ]
    if gpu:
        args.append(f"--gpus-per-task={gpu}")
    nice_value = nice(first.priority)
    if qos:
        args += qos
    elif nice_value:
        args.append(f"--nice={nice_value}")
    if first.vc != "default":  # a virtual cluster is a partition; "default" is the cluster's default partition
        args.append(f"--partition={first.vc}")
    minutes = first.time_limit_minutes
    if minutes:
        args.append(f"--time={max(math.ceil(minutes), 1)}")
    if first.run_as is not None:
        args += [f"--uid={first.run_as[0]}", f"--gid={first.run_as[1]}"]
    return args


def script(specs: Sequence[TaskSpec], adir: Path, total: int) -> str:
    """The batch script: a step per role with that role's task directories (SLURM_PROCID picks one)."""
    roles: dict[str, list[TaskSpec]] = {}
    for s in specs:
        roles.setdefault(s.role, []).append(s)
    wrapper = [str(adir / "wrapper.sh"), str(adir / "rdv"), str(total), str(adir / "shim.sh")]
    if len(specs) == 1:  # one task: the batch step is its step (an srun step launch costs about a second here)
        return "\n".join(
            [
                "#!/bin/bash",
                "# pai_jupyter: one task (runtime/slurm/batch.py)",
                "export SLURM_PROCID=0",
                shlex.join(["exec", "bash", *wrapper, str(specs[0].task_dir)]),
                "",
            ]
        )
    lines = ["#!/bin/bash", "# pai_jupyter: one step per task role (runtime/slurm/batch.py)"]
    for role, tasks in roles.items():
        s = tasks[0]
        gpus = s.gpu_count
        # a step without gres keeps the batch step's CUDA_VISIBLE_DEVICES (the allocation's GPUs): unset, so a
        # task that asked for no GPU sees none (measured on 22.05: ps saw worker's GPU 0)
        step = [
            *([] if gpus else ["env", *(f"--unset={v}" for v in GPU_VARS)]),
            "srun",
            "--exact",
            f"--job-name={role}",
            f"--ntasks={len(tasks)}",
            f"--nodes=1-{len(tasks)}",  # not all of the allocation's nodes: one another role fills may be busy
            f"--cpus-per-task={max(s.cpu, 1)}",
            f"--mem-per-cpu={max(math.ceil(s.memory_mb / max(s.cpu, 1)), 1)}",
            f"--gpus-per-task={gpus}" if gpus else "--gres=none",
            "bash",
            *wrapper,
            *(str(t.task_dir) for t in tasks),
        ]
        lines.append(shlex.join(step) + " &")
    lines += ["wait", ""]
    return "\n".join(lines)
