"""Database rows to OpenPAI v2 JSON shapes (list item, detail, task status, attempts, events)."""

from __future__ import annotations

import signal
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from ...common.states import FINAL
from ..core.store import AttemptRow, EventRow, JobCore, TaskRow, loads

EXIT_SPECS: dict[int, tuple[str, str, str]] = {
    0: ("Succeeded", "SUCCEEDED", "The task completed."),
    254: ("ImageNotFound", "PERMANENT", "The docker image is not present and could not be pulled."),
    226: ("RequirementsInstallFailed", "PERMANENT", "pip could not install the source dir's requirements.txt."),
    255: ("RuntimeUnknownError", "UNKNOWN", "The task could not be started or tracked."),
    -1200: ("ContainerOOMKilled", "TRANSIENT", "The task used more memory than it asked for."),
    -1300: ("TaskLost", "UNKNOWN", "The task ended while the daemon was down and left no exit status."),
}


def exit_spec(code: int | None, diagnostics: str | None) -> dict[str, Any] | None:
    """A small version of OpenPAI's exit spec: a phrase, a type and a reason for the common codes."""
    if code is None:
        return None
    if diagnostics and diagnostics.startswith("out of memory"):
        phrase, kind, reason = EXIT_SPECS[-1200]
    elif code in EXIT_SPECS:
        phrase, kind, reason = EXIT_SPECS[code]
    elif 128 < code < 160:
        try:
            name = signal.Signals(code - 128).name
        except ValueError:
            name = f"signal {code - 128}"
        transient = code in (130, 137, 143)
        phrase, kind, reason = (
            f"ContainerKilledBy{name}",
            "TRANSIENT" if transient else "PERMANENT",
            f"The task was killed by {name}.",
        )
    else:
        phrase, kind, reason = ("UserCommandFailed", "PERMANENT", "The user's command exited with a non-zero code.")
    return {"code": code, "phrase": phrase, "type": kind, "reason": reason}


def _gpu_mask(gpus: list[int]) -> int:
    return sum(1 << g for g in gpus)


def log_url(row: JobCore, task: TaskRow) -> str:
    fw = quote(f"{row['user']}~{row['name']}", safe="~")
    return (
        f"/api/v2/jobs/{fw}/attempts/{task['attempt']}/taskRoles/{quote(task['role'], safe='')}/taskIndex/"
        f"{task['idx']}/attempts/{task['task_attempt']}/logs"
    )


def task_status(row: JobCore, task: TaskRow) -> dict[str, Any]:
    ports = loads(task["ports"], {}) or {}
    gpus = loads(task["gpus"], []) or []
    handle = loads(task["handle"], {}) or {}
    state = "WAITING" if task["state"] == "STARTING" else task["state"]  # OpenPAI has no STARTING
    return {
        "taskIndex": task["idx"],
        "taskUid": f"{row['id']}.{task['attempt']}.{task['role']}.{task['idx']}",
        "taskState": state,
        "containerId": handle.get("id"),
        "containerIp": task["host_ip"],
        "containerNodeName": "local",
        "containerPorts": {k: ",".join(map(str, v)) for k, v in ports.items()},
        "containerGpus": _gpu_mask(gpus),
        "containerGpuIndices": gpus,
        "containerLog": log_url(row, task),
        "containerExitCode": task["exit_code"],
        "containerExitSpec": exit_spec(task["exit_code"], task["exit_diagnostics"]),
        "containerExitDiagnostics": task["exit_diagnostics"],
        "retries": task["task_attempt"],
        "accountableRetries": task["task_attempt"],
        "createdTime": task["created_time"],
        "launchedTime": task["launched_time"],
        "completedTime": task["completed_time"],
        "attemptId": task["attempt"],
        "attemptState": state,
        "taskAttemptId": task["task_attempt"],
        "runtime": task["runtime"],
    }


def detail(
    row: JobCore, item: dict[str, Any], tasks: list[TaskRow], roles: list[str], waiting_reason: str | None
) -> dict[str, Any]:
    """OpenPAI's job detail; ``item`` is the job's list item (from the store)."""
    status = dict(item)
    status.update(
        {
            "attemptId": row["attempt"],
            "attemptState": row["state"],
            "appId": f"{row['user']}~{row['name']}",
            "appProgress": None,
            "appTrackingUrl": "",
            "appCreatedTime": row["created_time"],
            "appLaunchedTime": row["launched_time"],
            "appCompletedTime": row["completed_time"],
            "appExitSpec": exit_spec(row["exit_code"], row["exit_diagnostics"]) if row["completed_time"] else None,
            "appExitDiagnostics": row["exit_diagnostics"],
            "appExitMessages": None,
            "appExitTriggerMessage": row["exit_diagnostics"],
            "appExitTriggerTaskRoleName": row["trigger_role"],
            "appExitTriggerTaskIndex": row["trigger_index"],
            "appExitType": (exit_spec(row["exit_code"], row["exit_diagnostics"]) or {}).get("type")
            if row["completed_time"]
            else None,
            "waitingReason": waiting_reason,
        }
    )
    task_roles: dict[str, Any] = {r: {"taskRoleStatus": {"name": r}, "taskStatuses": []} for r in roles}
    for t in tasks:
        task_roles.setdefault(t["role"], {"taskRoleStatus": {"name": t["role"]}, "taskStatuses": []})
        task_roles[t["role"]]["taskStatuses"].append(task_status(row, t))
    return {
        "debugId": status["debugId"],
        "name": row["name"],
        "tags": list(status.get("tags") or []),
        "jobPriority": "default",
        "jobStatus": status,
        "taskRoles": task_roles,
    }


def exit_diagnostics(diagnostics: str | None) -> dict[str, Any] | None:
    """OpenPAI's exitDiagnostics object (frameworkConverter.generateExitDiagnostics)."""
    return {"diagnosticsSummary": diagnostics, "runtime": None, "launcher": diagnostics} if diagnostics else None


def attempt_state(attempt: AttemptRow) -> str:
    """An attempt that has its outcome but not yet its end (its tasks are being stopped) is RUNNING, as OpenPAI's
    convertAttemptState shows AttemptDeletionPending; its outcome shows once it has ended."""
    return "RUNNING" if attempt["completed_time"] is None and attempt["state"] in FINAL else attempt["state"]


def attempt_status(attempt: AttemptRow | None) -> dict[str, Any]:
    """The jobStatus fields an earlier attempt answers with (state, times, exit) in a detail by attempt."""
    if attempt is None:
        return {}
    spec = exit_spec(attempt["exit_code"], attempt["exit_diagnostics"]) if attempt["completed_time"] else None
    state = attempt_state(attempt)
    return {
        "state": state,
        "attemptId": attempt["attempt"],
        "attemptState": state,
        "appLaunchedTime": attempt["launched_time"],
        "appCompletedTime": attempt["completed_time"],
        "appExitCode": attempt["exit_code"],
        "appExitSpec": spec,
        "appExitDiagnostics": attempt["exit_diagnostics"],
        "appExitTriggerTaskRoleName": attempt["trigger_role"],
        "appExitTriggerTaskIndex": attempt["trigger_index"],
        "appExitType": (spec or {}).get("type"),
    }


def attempt_item(row: JobCore, attempt: AttemptRow, tasks: list[TaskRow]) -> dict[str, Any]:
    """One job attempt as OpenPAI's job-attempts routes give it (frameworkConverter.convertToJobAttempt)."""
    ended = attempt["completed_time"] is not None
    spec = exit_spec(attempt["exit_code"], attempt["exit_diagnostics"]) if ended else None
    roles: dict[str, Any] = {}
    for t in tasks:
        roles.setdefault(t["role"], {"taskRoleStatus": {"name": t["role"]}, "taskStatuses": []})
        roles[t["role"]]["taskStatuses"].append(task_status(row, t))
    diagnostics = exit_diagnostics(attempt["exit_diagnostics"])
    return {
        "jobName": row["name"],
        "frameworkName": f"{row['user']}~{row['name']}",
        "uid": row["debug_id"],
        "userName": row["user"],
        "state": attempt_state(attempt),
        "originState": attempt_state(attempt),
        "attemptIndex": attempt["attempt"],
        "jobStartedTime": row["submission_time"],
        "attemptCreatedTime": attempt["created_time"],
        "attemptStartedTime": attempt["launched_time"],
        "attemptCompletedTime": attempt["completed_time"],
        "exitCode": attempt["exit_code"],
        "exitPhrase": (spec or {}).get("phrase"),
        "exitType": (spec or {}).get("type"),
        "exitDiagnostics": diagnostics,
        "appExitTriggerMessage": attempt["exit_diagnostics"],
        "appExitTriggerTaskRoleName": attempt["trigger_role"],
        "appExitTriggerTaskIndex": attempt["trigger_index"],
        "appExitSpec": spec,
        "appExitDiagnostics": attempt["exit_diagnostics"],
        "appExitMessages": {"container": None, "runtime": None, "launcher": attempt["exit_diagnostics"]}
        if diagnostics
        else None,
        "totalGpuNumber": row["total_gpu"],
        "totalTaskNumber": row["total_tasks"],
        "totalTaskRoleNumber": row["total_roles"],
        "jobPriority": "default",
        "taskRoles": roles,
        "isLatest": attempt["attempt"] == row["attempt"],
    }


def task_detail(row: JobCore, task: TaskRow) -> dict[str, Any]:
    """A task and its attempts, newest first (frameworkConverter.convertToTaskDetail). Earlier task attempts
    keep only their number and log location here: their exit is in the job's events."""
    status = task_status(row, task)
    state = status["taskState"]
    attempts = [
        {
            "attemptId": task["task_attempt"],
            "attemptState": state,
            "currentAttemptCreatedTime": task["created_time"],
            "currentAttemptLaunchedTime": task["launched_time"],
            "currentAttemptCompletedTime": task["completed_time"],
            "containerId": status["containerId"],
            "containerIp": status["containerIp"],
            "containerNodeName": "local",
            "containerPorts": status["containerPorts"],
            "containerGpus": status["containerGpus"],
            "containerLog": status["containerLog"],
            "containerExitCode": task["exit_code"],
            "containerExitSpec": status["containerExitSpec"],
            "containerExitDiagnostics": task["exit_diagnostics"],
        }
    ]
    for earlier in range(task["task_attempt"] - 1, -1, -1):
        attempts.append(
            {
                "attemptId": earlier,
                "attemptState": "FAILED",
                "currentAttemptCreatedTime": None,
                "currentAttemptLaunchedTime": None,
                "currentAttemptCompletedTime": None,
                "containerId": None,
                "containerIp": status["containerIp"],
                "containerNodeName": "local",
                "containerPorts": {},
                "containerGpus": None,
                "containerLog": log_url(row, {**task, "task_attempt": earlier}),
                "containerExitCode": None,
                "containerExitSpec": None,
                "containerExitDiagnostics": None,
            }
        )
    return {
        "username": row["user"],
        "jobName": row["name"],
        "jobAttemptId": task["attempt"],
        "taskRoleName": task["role"],
        "taskIndex": task["idx"],
        "taskUid": status["taskUid"],
        "taskState": state,
        "retries": task["task_attempt"],
        "accountableRetries": task["task_attempt"],
        "createdTime": task["created_time"],
        "launchedTime": task["launched_time"],
        "completedTime": task["completed_time"],
        "attempts": attempts,
    }


def iso_time(ms: int) -> str:
    """OpenPAI's events carry database timestamps: ISO 8601 strings in UTC, milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def event_item(row: JobCore, event: EventRow) -> dict[str, Any]:
    """A job event in OpenPAI's FrameworkEvent shape (controllers/v2/job.js getEvents)."""
    when = iso_time(event["time"])
    task = f"{row['user']}~{row['name']}-{event['role']}-{event['idx']}" if event["role"] is not None else None
    return {
        "uid": f"{row['debug_id']}.{event['id']}",
        "frameworkName": f"{row['user']}~{row['name']}",
        "podUid": None,
        "taskroleName": event["role"],
        "taskName": task,
        "taskIndex": event["idx"],
        "type": event["type"],
        "reason": event["reason"],
        "message": event["message"],
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
        "sourceComponent": "pai_jupyter",
        "sourceHost": "local",
    }
