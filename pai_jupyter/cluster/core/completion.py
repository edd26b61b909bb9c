"""OpenPAI's completion policy as a pure decision over one job attempt's tasks (FrameworkController's
CompletionPolicy): a role's failed tasks reaching minFailed fail the attempt, its succeeded tasks reaching
minSucceeded succeed it, null disables a rule, and an attempt whose tasks have all ended has succeeded."""

from __future__ import annotations

from dataclasses import dataclass

from ...common.states import FINAL
from ...protocol import Job
from .store import TaskRow


@dataclass
class Decision:
    state: str  # SUCCEEDED | FAILED
    trigger: TaskRow  # the task row that decided
    exit_code: int | None
    message: str


def decide(job: Job, tasks: list[TaskRow]) -> Decision | None:
    """The attempt's outcome once it is decided, else None (it goes on)."""
    for role in job.task_roles:
        mine = [t for t in tasks if t["role"] == role.name]
        failed = [t for t in mine if t["state"] == "FAILED"]
        succeeded = [t for t in mine if t["state"] == "SUCCEEDED"]
        if role.min_failed is not None and len(failed) >= role.min_failed:
            t = failed[-1]
            return Decision(
                "FAILED",
                t,
                t["exit_code"],
                f"{role.name}[{t['idx']}] failed"
                + (f": {t['exit_diagnostics']}" if t["exit_diagnostics"] else "")
                + f" (exit code {t['exit_code']})",
            )
        if role.min_succeeded is not None and len(succeeded) >= role.min_succeeded:
            return Decision(
                "SUCCEEDED", succeeded[-1], 0, f"{role.name} reached {role.min_succeeded} succeeded task(s)"
            )
    if tasks and all(t["state"] in FINAL for t in tasks):
        return Decision("SUCCEEDED", max(tasks, key=lambda t: t["completed_time"] or 0), 0, "all tasks completed")
    return None
