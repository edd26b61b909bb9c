"""A job whose completion rule decided while another task ignores SIGTERM stays RUNNING (subState
AttemptDeletionPending, as OpenPAI's convertState shows a framework whose attempt is being torn down) until that
task is gone: a client that waits for the job to be final then reads every task final. The same for a failed
attempt with a retry (the next attempt starts once the old tasks are gone), and across a kill -9 of the daemon.

The stubborn task traps TERM and waits for a file the test writes (the daemon's stop grace is long), so the
phase lasts exactly as long as the test wants, with no timing involved."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import read_runtime
from pai_jupyter.common.states import FINAL
from tests.helpers.daemon import Api, kill_leftovers, start_daemon
from tests.polling import wait_for

GRACE = 120.0  # the stubborn task outlives any test: it ends when the test releases it


def job(name: str, shared: Path, *, code: int = 0, retry_count: int = 0) -> str:
    """A ``worker`` that decides the job (``code``) once the ``ps`` is up, and a ``ps`` that ignores its stop
    until ``shared/release`` exists, then clears both files (the next attempt waits for its own)."""
    up, release = shared / "up", shared / "release"
    ps = f"trap '' TERM; touch {up}; while [ ! -f {release} ]; do sleep 0.05; done; rm -f {release} {up}; exit 0"
    worker = f"until [ -f {up} ]; do sleep 0.05; done; exit {code}"
    role = {"taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0}
    return json.dumps(
        {
            "jobName": name,
            "image": "pai-test/busybox:latest",
            "retryCount": retry_count,
            "taskRoles": [
                {"name": "worker", "command": worker, "minSucceededTaskCount": 1, **role},
                {"name": "ps", "command": ps, **role},
            ],
        }
    )


def tasks(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {role: t["taskStatuses"][0] for role, t in d["taskRoles"].items()}


def watch(api: Api, name: str, until: Any, what: str) -> dict[str, Any]:
    """Poll the detail until ``until(detail)``; on every read, a job that is final has only final tasks."""
    seen: list[dict[str, Any]] = []

    def look() -> dict[str, Any] | None:
        d = api.detail(name)
        seen[:] = [d]
        if d["jobStatus"]["state"] in FINAL:
            assert all(t["taskState"] in FINAL for t in tasks(d).values()), d
        return d if until(d) else None

    return wait_for(look, 60, lambda: f"{what}; last seen: {seen[-1] if seen else None}")


def tearing_down(d: dict[str, Any]) -> bool:
    return d["jobStatus"]["subState"] == "AttemptDeletionPending" and tasks(d)["ps"]["taskState"] == "RUNNING"


def final(d: dict[str, Any]) -> bool:
    return d["jobStatus"]["state"] in FINAL


def shared_dir(tmp_path: Path) -> Path:
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o777)  # the tasks may run as another account
    return out


def reasons(api: Api, name: str) -> list[str]:
    return [e["reason"] for e in reversed(api.http.get(f"/api/v2/jobs/{name}/events").json()["data"])]


def test_a_succeeded_job_is_final_only_once_its_stopped_task_is_gone(pai_home: Path, tmp_path: Path) -> None:
    shared = shared_dir(tmp_path)
    api = start_daemon(pai_home, stop_grace=GRACE)
    try:
        name = api.submit_ok(job("decided", shared))
        d = watch(api, name, tearing_down, "the worker to succeed while the ps ignores its stop")
        status = d["jobStatus"]
        assert (status["state"], status["attemptState"], status["completedTime"]) == ("RUNNING", "RUNNING", None)
        assert status["appExitTriggerTaskRoleName"] == "worker" and "worker reached 1" in status["appExitDiagnostics"]
        assert tasks(d)["worker"]["taskState"] == "SUCCEEDED"
        (shared / "release").touch()
        d = watch(api, name, final, "the job to end")
        assert (d["jobStatus"]["state"], d["jobStatus"]["subState"]) == ("SUCCEEDED", "Completed")
        assert tasks(d)["ps"]["taskState"] == "STOPPED"
        got = reasons(api, name)
        assert got.index("TaskStopped") < got.index("JobSucceeded") == len(got) - 1
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)


def test_a_failed_attempt_is_retried_once_its_tasks_are_gone(pai_home: Path, tmp_path: Path) -> None:
    shared = shared_dir(tmp_path)
    api = start_daemon(pai_home, stop_grace=GRACE)
    try:
        name = api.submit_ok(job("again", shared, code=3, retry_count=1))
        d = watch(api, name, tearing_down, "the worker to fail while the ps ignores its stop")
        status = d["jobStatus"]
        assert (status["state"], status["attemptId"], status["retries"]) == ("RUNNING", 0, 0)
        assert status["appExitCode"] == 3 and status["appExitTriggerTaskRoleName"] == "worker"
        assert len(api.http.get(f"/api/v2/jobs/{name}/job-attempts").json()) == 1
        (shared / "release").touch()
        d = watch(
            api,
            name,
            lambda d: d["jobStatus"]["attemptId"] == 1 and tearing_down(d),
            "the retry to fail while its ps ignores its stop",
        )
        assert (d["jobStatus"]["state"], d["jobStatus"]["retries"]) == ("RUNNING", 1)
        first = {
            role: t["taskStatuses"][0]
            for role, t in api.http.get(f"/api/v2/jobs/{name}/job-attempts/0").json()["taskRoles"].items()
        }
        assert (first["worker"]["taskState"], first["ps"]["taskState"]) == ("FAILED", "STOPPED")
        assert min(t["launchedTime"] for t in tasks(d).values()) >= first["ps"]["completedTime"]
        (shared / "release").touch()
        d = watch(api, name, final, "the job to end")
        assert (d["jobStatus"]["state"], d["jobStatus"]["retries"], d["jobStatus"]["appExitCode"]) == ("FAILED", 1, 3)
        got = reasons(api, name)
        assert got.index("TaskStopped") < got.index("JobRetry") < got.index("JobFailed") == len(got) - 1
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)


def test_a_daemon_killed_while_the_attempt_is_torn_down_finishes_it(pai_home: Path, tmp_path: Path) -> None:
    shared = shared_dir(tmp_path)
    api = start_daemon(pai_home, stop_grace=GRACE)
    try:
        name = api.submit_ok(job("crash", shared))
        watch(api, name, tearing_down, "the worker to succeed while the ps ignores its stop")
        os.kill(read_runtime(pai_home)["pid"], signal.SIGKILL)
        api = start_daemon(pai_home, stop_grace=GRACE)  # the ps still runs: re-attached, still being stopped
        d = watch(api, name, tearing_down, "the restarted daemon to show the attempt still torn down")
        assert d["jobStatus"]["state"] == "RUNNING"
        os.kill(read_runtime(pai_home)["pid"], signal.SIGKILL)
        (shared / "release").touch()  # the ps ends while no daemon runs
        wait_for(lambda: not (shared / "up").exists(), 60, "the ps to end while the daemon is down")
        api = start_daemon(pai_home, stop_grace=GRACE)
        d = watch(api, name, final, "the restarted daemon to end the job")
        assert d["jobStatus"]["state"] == "SUCCEEDED" and tasks(d)["ps"]["taskState"] == "STOPPED"
        assert reasons(api, name)[-1] == "JobSucceeded"
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)
