"""Client error mapping, retries and typed results, against httpx.MockTransport (no server)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pai_jupyter.client import (
    Client,
    InvalidJob,
    JobConflict,
    JobDetail,
    JobNotFound,
    RateLimited,
    ServerUnavailable,
    Unauthorized,
)
from pai_jupyter.client.calls import new_lines

# A job detail as a real OpenPAI v2 rest-server (master) returns it, with fields we do not model.
OPENPAI_DETAIL: dict[str, Any] = {
    "debugId": "6c0b1ae2f3d44b1d8f4c0a0a7b1c2d3e",
    "name": "tf_cifar10",
    "tags": ["exp1"],
    "jobPriority": "default",
    "jobStatus": {
        "debugId": "6c0b1ae2f3d44b1d8f4c0a0a7b1c2d3e",
        "name": "tf_cifar10",
        "username": "alice",
        "state": "FAILED",
        "subState": "Completed",
        "executionType": "START",
        "tags": ["exp1"],
        "retries": 1,
        "retryDetails": {"user": 1, "platform": 0, "resource": 0},
        "retryDelayTime": None,
        "submissionTime": 1700000000000,
        "createdTime": 1700000000500,
        "launchedTime": 1700000010000,
        "completedTime": 1700000100000,
        "appExitCode": 137,
        "virtualCluster": "default",
        "totalGpuNumber": 2,
        "totalTaskNumber": 2,
        "totalTaskRoleNumber": 1,
        "jobPriority": "default",
        "attemptId": 1,
        "attemptState": "FAILED",
        "appId": "a1b2",
        "appProgress": 1,
        "appTrackingUrl": "",
        "appCreatedTime": 1700000000500,
        "appLaunchedTime": 1700000010000,
        "appCompletedTime": 1700000100000,
        "appExitSpec": {
            "code": 137,
            "phrase": "ContainerSigKilled",
            "issuer": "USER",
            "causer": "USER",
            "type": "TRANSIENT",
            "stage": "RUNNING",
            "behavior": "UNKNOWN",
            "reaction": "RETRY_TO_MAX",
            "reason": "Container killed by OS Signal: SIGKILL",
            "repro": [],
            "solution": [],
        },
        "appExitDiagnostics": "Exited with 137",
        "appExitMessages": {"container": None, "runtime": None, "launcher": None},
        "appExitTriggerMessage": "",
        "appExitTriggerTaskRoleName": "worker",
        "appExitTriggerTaskIndex": 1,
        "appExitType": "TRANSIENT",
    },
    "taskRoles": {
        "worker": {
            "taskRoleStatus": {"name": "worker"},
            "taskStatuses": [
                {
                    "taskIndex": i,
                    "taskUid": f"uid-{i}",
                    "taskState": "FAILED" if i else "SUCCEEDED",
                    "containerId": f"pod-{i}",
                    "containerIp": "10.0.0.5",
                    "containerNodeName": "node-5",
                    "containerPorts": {"ssh": "20001", "http": "20002"},
                    "containerGpus": 1 << i,
                    "containerLog": "http://10.0.0.5:9103/log-manager/...",
                    "containerExitCode": 137 if i else 0,
                    "containerExitSpec": None,
                    "containerExitDiagnostics": "OOMKilled" if i else "",
                    "retries": 0,
                    "accountableRetries": 0,
                    "createdTime": 1700000001000,
                    "launchedTime": 1700000010000,
                    "completedTime": 1700000100000,
                    "attemptId": 1,
                    "attemptState": "FAILED",
                    "currentAttemptCreatedTime": 1700000001000,
                    "hived": {"affinityGroupName": "x"},
                }
                for i in range(2)
            ],
        }
    },
}


def client_with(handler: Any, **kw: Any) -> Client:
    """A client whose requests go to ``handler`` (an OpenPAI: its info has no "local")."""

    def openpai(req: httpx.Request) -> httpx.Response:
        if req.url.path.endswith("/api/v2/info"):
            return httpx.Response(200, json={"launcherType": "k8s"})
        return handler(req)

    return Client(
        url="http://openpai.test/rest-server",
        token="t0k",
        username="alice",
        retries=kw.pop("retries", 2),
        transport=httpx.MockTransport(openpai),
    )


def test_a_recorded_openpai_detail_parses_into_typed_results() -> None:
    seen = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json=OPENPAI_DETAIL)

    d = client_with(handler).detail("tf_cifar10")
    assert isinstance(d, JobDetail)
    assert seen[0].url.path == "/rest-server/api/v2/jobs/alice~tf_cifar10"
    assert seen[0].headers["Authorization"] == "Bearer t0k"
    assert d.id == "alice~tf_cifar10" and d.state == "FAILED" and d.exit_code == 137
    assert d.job_status.app_exit_trigger_task_index == 1 and d.job_status.submission_time.year == 2023
    assert [t.task_state for t in d.tasks] == ["SUCCEEDED", "FAILED"]
    assert d.tasks[1].container_ports == {"ssh": "20001", "http": "20002"} and d.tasks[1].role == "worker"
    frame = d.to_frame()
    assert list(frame["task_state"]) == ["SUCCEEDED", "FAILED"]
    assert "alice~tf_cifar10" in d._repr_html_()


def test_html_is_escaped() -> None:
    payload = json.loads(json.dumps(OPENPAI_DETAIL))
    payload["taskRoles"]["worker"]["taskStatuses"][0]["containerExitDiagnostics"] = "<script>alert(1)</script>"
    d = client_with(lambda r: httpx.Response(200, json=payload)).detail("x")
    html = d._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize(
    ("status", "body", "exc"),
    [
        (404, {"code": "NoJobError", "message": "job alice~x was not found"}, JobNotFound),
        (409, {"code": "ConflictJobError", "message": "exists"}, JobConflict),
        (
            400,
            {"code": "InvalidProtocolError", "message": "bad", "problems": [{"path": "name", "message": "m"}]},
            InvalidJob,
        ),
        (401, {"code": "UnauthorizedUserError", "message": "token expired"}, Unauthorized),
        (403, {"code": "ForbiddenUserError", "message": "no"}, Unauthorized),
        (500, {"code": "UnknownError", "message": "boom"}, ServerUnavailable),
    ],
)
def test_errors_map_to_actionable_exceptions(status: int, body: dict[str, Any], exc: type) -> None:
    c = client_with(lambda r: httpx.Response(status, json=body), retries=0)
    with pytest.raises(exc) as info:
        c.detail("x")
    assert body["message"] in str(info.value)
    if exc is InvalidJob:
        assert info.value.problems == [{"path": "name", "message": "m"}]


def test_429_is_retried_after_retry_after_on_idempotent_calls() -> None:
    calls = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req.method)
        if len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": "0.2"}, json={"code": "TooManyRequests"})
        return httpx.Response(200, json=OPENPAI_DETAIL)

    import time

    t0 = time.monotonic()
    assert client_with(handler).detail("x").state == "FAILED"
    assert len(calls) == 2 and time.monotonic() - t0 >= 0.2


def test_429_on_submit_is_not_retried_and_says_when_to_retry() -> None:
    calls = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req.method)
        return httpx.Response(429, headers={"Retry-After": "30"}, json={"code": "TooManyRequests", "message": "slow"})

    job = (
        "protocolVersion: 2\nname: a\ntype: job\nprerequisites: [{name: i, type: dockerimage, uri: x}]\n"
        "taskRoles: {m: {dockerImage: i, resourcePerInstance: {cpu: 1, memoryMB: 100, gpu: 0}, commands: [x]}}\n"
    )
    with pytest.raises(RateLimited) as info:
        client_with(handler).submit(job)
    assert calls == ["POST"] and info.value.retry_after == 30


def test_connection_refused_names_the_profile_and_url() -> None:
    c = Client(url="http://127.0.0.1:9", token="t", username="u", retries=1)
    with pytest.raises(ServerUnavailable) as info:
        c.detail("x")
    assert "http://127.0.0.1:9" in str(info.value)


def test_v1_jobs_are_sent_as_v2_yaml_to_a_real_openpai() -> None:
    sent = []

    def handler(req: httpx.Request) -> httpx.Response:
        sent.append(req)
        return httpx.Response(202, json={"status": 202})

    v1 = json.dumps(
        {
            "jobName": "j",
            "image": "img",
            "taskRoles": [
                {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 200, "gpuNumber": 0, "command": "true"}
            ],
        }
    )
    assert client_with(handler).submit(v1) == "alice~j"
    assert sent[0].headers["Content-Type"] == "text/yaml"
    assert b"protocolVersion: 2" in sent[0].content


def test_bad_job_is_refused_before_any_request() -> None:
    c = client_with(lambda r: pytest.fail("no request expected"))
    with pytest.raises(InvalidJob) as info:
        c.submit('{"jobName": "x"}')
    assert {p["path"] for p in info.value.problems} >= {"image", "taskRoles"}


def test_polled_tails_yield_each_line_once() -> None:
    assert new_lines([], ["a", "b"]) == ["a", "b"]
    assert new_lines(["a", "b"], ["a", "b", "c"]) == ["c"]
    assert new_lines(["a", "b", "c"], ["c", "d"]) == ["d"]  # the window slid
    assert new_lines(["x"], ["y", "z"]) == ["y", "z"]  # no overlap: all new


MASKED_CONFIG = (
    "protocolVersion: 2\nname: tf_cifar10\ntype: job\nsecrets: '******'\n"
    "prerequisites: [{name: i, type: dockerimage, uri: busybox}]\n"
    "taskRoles:\n  main:\n    dockerImage: i\n    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}\n"
    "    commands: ['echo <% $secrets.token %>']\n"
)


def test_a_remote_clone_of_a_job_with_withheld_secrets_says_what_to_do_and_submits_nothing() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.path}")
        if request.url.path.endswith("/config"):
            return httpx.Response(200, text=MASKED_CONFIG, headers={"content-type": "text/yaml"})
        return httpx.Response(500)

    with pytest.raises(InvalidJob) as info:
        client_with(handler).clone("alice~tf_cifar10")
    assert "withholds" in str(info.value) and info.value.problems == [
        {"path": "secrets", "message": "withheld by the cluster"}
    ]
    assert calls == ["GET /rest-server/api/v2/jobs/alice~tf_cifar10/config"]  # no submit


def test_a_served_config_with_withheld_secrets_still_reads_as_a_job() -> None:
    from pai_jupyter.protocol import JobValidationError, mask_document
    from pai_jupyter.protocol.load import job_from_served_config, job_from_text

    job = job_from_served_config(MASKED_CONFIG)
    assert job.task_roles[0].name == "main" and job.secrets == {}
    with pytest.raises(JobValidationError):  # as a document to submit, OpenPAI refuses it and so do we
        job_from_text(MASKED_CONFIG)
    assert mask_document({"secrets": {}}) == {"secrets": {}}  # nothing to withhold
