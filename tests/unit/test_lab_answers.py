"""The Lab's answers are shaped from the client's models once: the job list's row and the job page say the same
of a job (``JobFields``, read off JobSummary by wire name), the queue view's entries are QueuedJob's fields, and a
field the answer names that the model lacks fails on import (``fields_named``), not in a browser."""

from __future__ import annotations

import pytest

from pai_jupyter.client.models import JobDetail, JobEvent, JobSummary, TaskService, WaitingQueue
from pai_jupyter.server.answers import JobFields, QueuedJob, fields_named
from pai_jupyter.server.jobs import job_fields, job_row
from pai_jupyter.server.lab_api import detail_json, event_json
from pai_jupyter.server.lab_queue import queue_json

STATUS = {
    "name": "train",
    "username": "alice",
    "state": "RUNNING",
    "subState": "AttemptRunning",
    "retries": 2,
    "submissionTime": 1767261600000,  # 2026-01-01 10:00 UTC
    "launchedTime": 1767261605000,
    "completedTime": None,
    "virtualCluster": "gpu",
    "totalGpuNumber": 4,
    "totalTaskNumber": 2,
    "appExitCode": None,
    "tags": ["sweep:lr"],
    "somethingNew": "kept by the model, not sent to the Lab",
}
DETAIL = {
    "name": "train",
    "jobStatus": {**STATUS, "appExitDiagnostics": None, "waitingReason": None},
    "taskRoles": {"main": {"taskStatuses": [{"taskIndex": 0, "taskState": "RUNNING", "containerIp": "10.0.0.2"}]}},
}


def test_the_row_and_the_job_page_say_the_same_of_a_job() -> None:
    summary = JobSummary.model_validate(STATUS)
    detail = JobDetail.from_api(DETAIL)
    row = job_row("/base/", summary, [], None)
    page = detail_json("/base/", detail)
    shared = set(JobFields.__required_keys__)
    assert {k: row[k] for k in shared} == {k: page[k] for k in shared}  # type: ignore[literal-required]
    assert row["submissionTime"] is not None and row["submissionTime"].startswith("2026-01-01T10:00:00")
    assert (row["retries"], row["totalGpuNumber"], row["virtualCluster"]) == (2, 4, "gpu")
    assert row["metricsUrl"] == "/base/pai/api/jobs/alice~train/metrics" and row["sweep"] == "lr"
    assert set(job_fields("/", summary)) == shared  # exactly JobFields: no extra the server happens to have


def test_a_field_the_answer_names_but_the_model_lacks_fails_at_once() -> None:
    assert fields_named(JobSummary, ["totalGpuNumber", "virtualCluster"]) == {"total_gpu_number", "virtual_cluster"}
    with pytest.raises(KeyError, match="somethingNew"):
        fields_named(JobSummary, ["somethingNew"])  # an extra the server sent is no declared field


def test_the_job_page_lists_each_running_tasks_own_services() -> None:
    board = TaskService(role="main", index=0, name="tensorboard", port=6006, state="running")
    other = TaskService(role="main", index=1, name="jupyter", port=8888, state="running")
    task = detail_json("/b/", JobDetail.from_api(DETAIL), [board, other])["tasks"][0]
    assert [s["name"] for s in task["services"]] == ["tensorboard"] and task["ip"] == "10.0.0.2"


def test_the_queue_view_gets_the_entries_fields_it_declares() -> None:
    queue = WaitingQueue.model_validate(
        {
            "virtualClusters": {
                "default": [
                    {
                        "job": "alice~a",
                        "username": "alice",
                        "name": "a",
                        "ahead": 0,
                        "jobPriority": "prod",
                        "waitingReason": "needs 1 GPU",
                        "submissionTime": 1767261600000,
                        "startEstimate": None,
                    }
                ]
            },
            "canReorder": True,
        }
    )
    answer = queue_json(queue)
    assert answer["canReorder"] is True
    assert answer["virtualClusters"]["default"] == [
        {
            "job": "alice~a",
            "username": "alice",
            "name": "a",
            "ahead": 0,
            "jobPriority": "prod",
            "waitingReason": "needs 1 GPU",
        }
    ]
    assert set(answer["virtualClusters"]["default"][0]) == set(QueuedJob.__required_keys__)


def test_an_event_says_when_it_last_happened_and_leaves_out_what_the_cluster_did_not_say() -> None:
    event = JobEvent.model_validate(
        {"type": "Normal", "reason": "Submitted", "firstTimestamp": "2026-01-01T10:00:00Z", "count": 1}
    )
    assert event_json(event) == {"time": "2026-01-01T10:00:00Z", "type": "Normal", "reason": "Submitted"}
    assert event.model_extra == {"count": 1}  # the wire shape's other fields are kept
