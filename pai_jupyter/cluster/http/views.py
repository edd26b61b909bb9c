"""Database rows to OpenPAI v2 JSON shapes (list item, detail, task status, attempts, events)."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from ...common.states import FINAL
from ..core.store import AttemptRow, EventRow, JobCore, TaskRow, loads
from ..runtime.base import LOCAL_NODE

EXIT_SPEC_FILE = Path(__file__).with_name("exitspec.yaml")  # OpenPAI's table, unchanged (MIT; see its header)
# Codes the embedded cluster gives a meaning of its own, where OpenPAI's table has another (or none)
LOCAL_EXIT_SPECS: dict[int, tuple[str, str]] = {
    226: ("RequirementsInstallFailed", "pip could not install the source dir's requirements.txt."),
    -1300: ("TaskLost", "The task ended while the daemon was down and left no exit status."),
}
USER_COMMAND_UNKNOWN = 255  # OpenPAI's runtime answers an exit it recognises no pattern in with this code
COMMAND_NOT_FOUND = (127, 220)  # ... and bash's "command not found" with UserCommandExitWithError


@functools.cache
def exit_spec_table() -> dict[int, dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return {s["code"]: s for s in yaml.load(EXIT_SPEC_FILE.read_text(), Loader=loader)["spec"]}


def exit_spec(code: int | None, diagnostics: str | None) -> dict[str, Any] | None:
    """OpenPAI's exit spec of a task's or job's exit code (frameworkConverter.generateExitSpec over its table),
    with the code as we saw it: a user command's exit that OpenPAI's runtime would report as 255
    (PAIRuntimeUnknownFailed: anything its patterns do not name) gets that entry; 127 gets 220; a code the table
    lacks gets the fallback of its sign (256, -8000); an out-of-memory kill gets -1200's."""
    if code is None:
        return None
    table = exit_spec_table()
    if diagnostics and diagnostics.startswith("out of memory"):
        return {**table[-1200], "code": code}
    if code in LOCAL_EXIT_SPECS:
        phrase, reason = LOCAL_EXIT_SPECS[code]
        kind, reaction = ("USER_FAILURE", "NEVER_RETRY") if code > 0 else ("UNKNOWN_FAILURE", "RETRY_TO_MAX")
        return {"code": code, "phrase": phrase, "type": kind, "reaction": reaction, "reason": reason}
    if code == COMMAND_NOT_FOUND[0]:
        return {**table[COMMAND_NOT_FOUND[1]], "code": code}
    if code in table:
        return table[code]
    if 0 < code < 256:
        return {**table[USER_COMMAND_UNKNOWN], "code": code}
    return {**table[256 if code > 0 else -8000], "code": code}


def exit_type(code: int | None) -> str | None:
    """OpenPAI's appExitType / exitType: the completion type's name (FrameworkController's Succeeded or Failed)."""
    return None if code is None else ("Succeeded" if code == 0 else "Failed")


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
        "containerNodeName": (handle.get("info") or {}).get("placed", {}).get("node") or LOCAL_NODE,
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
            "appExitType": exit_type(row["exit_code"]) if row["completed_time"] else None,
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
        "jobPriority": status.get("jobPriority", "default"),
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
        "appExitType": exit_type(attempt["exit_code"]) if spec else None,
    }


def attempt_item(
    row: JobCore, attempt: AttemptRow, tasks: list[TaskRow], priority: str | None = None
) -> dict[str, Any]:
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
        "exitType": exit_type(attempt["exit_code"]) if spec else None,
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
        "jobPriority": priority or "default",
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
            "containerNodeName": status["containerNodeName"],
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
                "containerNodeName": status["containerNodeName"],
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


def pod_uid(row: JobCore, role: str, idx: int) -> str:
    """A task's stand-in for the pod UID OpenPAI's events carry: a UUID, the same for the task every time."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pai-jupyter:{row['debug_id']}:{row['id']}:{role}:{idx}"))


def event_item(row: JobCore, event: EventRow, first_role: str) -> dict[str, Any]:
    """A job event in OpenPAI's FrameworkEvent shape (controllers/v2/job.js getEvents), whose pod and task fields
    are always set (its events are all about pods): an event of the whole job (submitted, retried, stopped) is
    told as one about its first task, ``first_role`` [0]; the task name is OpenPAI's ``<debugId>-<role>-<index>``."""
    when = iso_time(event["time"])
    role, idx = (event["role"], event["idx"]) if event["role"] is not None else (first_role, 0)
    return {
        "uid": f"{row['debug_id']}.{event['id']}",
        "frameworkName": f"{row['user']}~{row['name']}",
        "podUid": pod_uid(row, role, idx or 0),
        "taskroleName": role,
        "taskName": f"{row['debug_id']}-{role}-{idx or 0}",
        "taskIndex": idx or 0,
        "type": event["type"],
        "reason": event["reason"],
        "message": event["message"],
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
        "sourceComponent": "pai_jupyter",
        "sourceHost": "local",
    }
