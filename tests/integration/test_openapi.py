"""The daemon's OpenAPI description (pai_jupyter/cluster/http/openapi.yaml) checked against the daemon itself.

(a) every route of ``make_app`` is in the spec with exactly the methods its handler serves, and nothing else is;
(b) schemathesis drives every operation but the terminal websocket (a fuzzer cannot speak websocket) against a real
    daemon (process runtime): nothing answers 5xx, and status codes, content types and bodies are the documented
    ones. Seeded jobs (succeeded, failed, waiting, running) are swapped into the generated ``{user}~{name}`` paths
    so that the fuzzer reaches real jobs, not only 404s;
(c) the main routes' answers for a succeeded, a failed, a waiting and a running job, the task routes' (services,
    their stop/start, metrics, the terminal's handshake) and each documented error validate against the spec's
    schemas (converted to JSON Schema here, checked with jsonschema_rs).

The fuzzer's accepted submissions never run: the daemon has 2 CPUs, a seeded ``sleep`` job holds both, and a
seeded waiting job heads the FIFO queue, so every later job waits behind it (or is refused as too big); nothing
the fuzzer can reach stops either of them. The running job also runs TensorBoard (its runtime plugin); the fuzzer
never points a service stop/start at it, so the explicit checks find it as they left it.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import psutil
import pytest
import schemathesis
import tornado.web
import yaml
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

import pai_jupyter.cluster
from pai_jupyter.cluster import control
from pai_jupyter.cluster.http.app import make_app
from pai_jupyter.cluster.task.nvml import Nvml
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1
from tests.polling import wait_for

SPEC_PATH = Path(pai_jupyter.cluster.__file__).parent / "http" / "openapi.yaml"
SPEC: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
METHODS = ("get", "post", "put", "delete", "patch", "head", "options")
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

CONFIG = schemathesis.Config.from_dict(
    {
        # how long generating an example takes says nothing of the daemon: on a busy 2-core CI machine Hypothesis'
        # "too slow" check failed the job schema's (once in a loaded CI run), with no request sent
        "suppress-health-check": ["too_slow"],
        "generation": {"max-examples": 25, "database": "none", "deterministic": True},
        "request-timeout": 15,
        # The coverage phase walks every keyword of the job schemas under six media types (thousands of submissions,
        # half a minute); submissions get more fuzzed examples instead, and test_error_answers_match_the_spec covers
        # the 409/413/415 answers.
        "operations": [
            {
                "include-operation-id": "submitJob",
                "phases": {"coverage": {"enabled": False}},
                "generation": {"max-examples": 60},
            }
        ]
        + [
            # failed logins count against the client's limit (100 in 5 minutes; all of this test is one client)
            {"include-operation-id": op, "phases": {"coverage": {"enabled": False}}, "generation": {"max-examples": 10}}
            for op in ("login", "loginV1", "loginV1Token")
        ],
    }
)
TERMINAL_OPERATION = "openTaskTerminal"  # a websocket: described in the spec, checked in (a) and (c), never fuzzed
schema = schemathesis.openapi.from_path(SPEC_PATH, config=CONFIG).exclude(operation_id=TERMINAL_OPERATION)


# ---- (a) the route table and the spec name the same routes and methods ----------------------------------------
def _app_rules() -> list[tuple[str, type]]:
    app = make_app(None)  # type: ignore[arg-type]  # the cluster is only handed to handlers, none runs here
    return [(rule.matcher.regex.pattern, rule.target) for rule in app.wildcard_router.rules]


def _route_templates() -> dict[str, set[str]]:
    """Route regexes as `{}` templates (character classes such as v[12] expanded) -> methods their handler serves."""
    out: dict[str, set[str]] = {}
    for pattern, handler in _app_rules():
        methods = {m for m in METHODS if getattr(handler, m) is not getattr(tornado.web.RequestHandler, m)}
        pattern = re.sub(r"\(\?!(?:[^()\\]|\\.)*\)", "", pattern)  # a lookahead only keeps a literal route out
        variants = [re.sub(r"\((?:[^()\\]|\\.)*\)", "{}", pattern.removesuffix("$"))]
        while any("[" in v for v in variants):
            expanded = []
            for v in variants:
                m = re.search(r"\[([A-Za-z0-9]+)\]", v)
                assert m, f"cannot expand {v!r}"
                expanded += [v[: m.start()] + ch + v[m.end() :] for ch in m.group(1)]
            variants = expanded
        for v in variants:
            assert "\\" not in v and "[" not in v, f"route {pattern!r} has regex syntax outside its groups"
            out[v] = methods
    return out


def _spec_templates() -> dict[str, set[str]]:
    return {re.sub(r"\{[^}]+\}", "{}", path): {m for m in item if m in METHODS} for path, item in SPEC["paths"].items()}


def test_every_route_is_in_the_spec_and_every_spec_path_is_a_route() -> None:
    routes, spec = _route_templates(), _spec_templates()
    assert sorted(set(routes) - set(spec)) == [], "routes of make_app the spec does not describe"
    assert sorted(set(spec) - set(routes)) == [], "spec paths make_app does not serve"
    for template, methods in routes.items():
        assert spec[template] == methods, f"{template}: the handler serves {methods}, the spec says {spec[template]}"


def _param(p: dict[str, Any]) -> dict[str, Any]:
    return SPEC["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p


def test_spec_paths_filled_with_example_values_reach_exactly_one_route() -> None:
    regexes = [re.compile(pattern) for pattern, _ in _app_rules()]
    for path, item in SPEC["paths"].items():
        values = {}
        for p in map(_param, item.get("parameters", [])):
            assert p["in"] == "path" and p["required"], (path, p["name"])
            values[p["name"]] = p["schema"].get("example", (p["schema"].get("enum") or [None])[0])
        concrete = path.format(**values)
        assert [r.pattern for r in regexes if r.match(concrete)], (path, concrete)
        assert sum(bool(r.match(concrete)) for r in regexes) == 1, (path, concrete)
        assert set(re.findall(r"\{([^}]+)\}", path)) == set(values), path


def test_bearer_auth_everywhere_but_login_and_every_status_has_a_body_schema() -> None:
    assert SPEC["openapi"].startswith("3.0.")
    assert SPEC["security"] == [{"bearerAuth": []}]
    for path, item in SPEC["paths"].items():
        for method in (m for m in item if m in METHODS):
            op = item[method]
            public = (
                path.endswith("/authn/basic/login")
                or path in ("/api/v1", "/api/v2", "/api/v2/info")
                or (path == "/api/v1/token" and method == "post")
                or path.startswith("/api/v2/local/logs/")
            )
            assert (op.get("security") == []) is public, (method, path)
            assert "401" in op["responses"], (method, path)
            for status, response in op["responses"].items():
                response = _resolve(response)
                if status == "101":  # a websocket upgrade has no body
                    assert op["operationId"] == TERMINAL_OPERATION and "content" not in response, (method, path)
                    continue
                assert response.get("content"), (method, path, status)
                assert all("schema" in media for media in response["content"].values()), (method, path, status)


# ---- spec schemas as JSON Schema (OpenAPI 3.0's `nullable` becomes a null branch) ----------------------------------
def _resolve(obj: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in obj:
        _, section, kind, name = obj["$ref"].split("/")
        obj = SPEC[section][kind][name]
    return obj


def _json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k not in ("nullable", "example", "examples")}
    if node.get("nullable"):
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return {"anyOf": [out, {"type": "null"}]}
    return out


COMPONENT_SCHEMAS = {name: _json_schema(s) for name, s in SPEC["components"]["schemas"].items()}


def _validator(path: str, method: str, status: int, media: str = "application/json") -> jsonschema_rs.Draft4Validator:
    response = _resolve(SPEC["paths"][path][method]["responses"][str(status)])
    body_schema = response["content"][media]["schema"]
    return jsonschema_rs.Draft4Validator({**_json_schema(body_schema), "components": {"schemas": COMPONENT_SCHEMAS}})


def conforms(r: httpx.Response, path: str, method: str | None = None) -> Any:
    """Check an answer against the spec: a documented status, its content type, its body schema. Returns the body."""
    method = method or r.request.method.lower()
    responses = SPEC["paths"][path][method]["responses"]
    assert str(r.status_code) in responses, f"{method.upper()} {path}: undocumented {r.status_code}: {r.text[:300]}"
    media = r.headers["content-type"].split(";")[0].strip()
    content = _resolve(responses[str(r.status_code)])["content"]
    assert media in content, f"{method.upper()} {path} {r.status_code}: {media} is not one of {list(content)}"
    body = r.json() if media == "application/json" else yaml.safe_load(r.text) if media == "text/yaml" else r.text
    errors = [
        f"{'/'.join(map(str, e.instance_path))}: {e.message}"
        for e in _validator(path, method, r.status_code, media).iter_errors(body)
    ]
    assert not errors, f"{method.upper()} {path} {r.status_code} does not match the spec:\n" + "\n".join(errors[:20])
    return body


# ---- the daemon the contract tests run against ----------------------------------------------------------------
@dataclass
class Seeded:
    api: Api
    user: str
    succeeded: str
    failed: str
    waiting: str
    running: str
    deletable: tuple[str, ...]


WAITING_V2 = """\
protocolVersion: 2
name: seed-waiting
type: job
prerequisites:
  - {name: busybox, type: dockerimage, uri: busybox:latest}
secrets:
  token: do-not-show
taskRoles:
  main:
    instances: 1
    dockerImage: busybox
    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}
    commands: [echo never runs while the blocker holds both CPUs]
"""


def with_tensorboard(job_json: str, **extras: object) -> str:
    """A v1 job (from ``v1``) with the tensorboard runtime plugin: a TensorBoard service in its task 0."""
    doc = json.loads(job_json)
    doc["extras"] = {"com.microsoft.pai.runtimeplugin": [{"plugin": "tensorboard"}], **extras}
    return json.dumps(doc)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    home = tmp_path_factory.mktemp("openapi") / "pai-home"
    api = start_daemon(home, cpus=2, memory_mb=1024, gpus=0, stop_grace=0.2)
    try:
        user = api.http.get("/api/v2/info").json()["user"]
        succeeded = api.submit_ok(v1("seed-ok", "echo contract ok; echo a warning >&2"))
        # a finished task that had a service: its service is `stopped`, and stop/start on it is 400
        failed = api.submit_ok(with_tensorboard(v1("seed-failed", "echo about to fail; exit 3")))
        deletable = tuple(api.submit_ok(v1(f"seed-trash-{i}", "true")) for i in range(2))
        for job in (succeeded, failed, *deletable):
            api.wait(job)
        # TensorBoard needs ~200 MB; it starts now and is up by the time the explicit checks ask for it
        # of the highest class: the fuzzed priority changes of the waiting job never preempt it
        crit = {"jobPriorityClass": "crit"}
        blocker = v1("seed-blocker", "sleep 600", cpuNumber=2, memoryMB=768)
        running = api.submit_ok(with_tensorboard(blocker, hivedScheduler=crit))
        api.wait(running, ("RUNNING",))
        waiting = api.submit_ok(WAITING_V2)
        assert api.detail(waiting)["jobStatus"]["waitingReason"]
        yield Seeded(api, user, succeeded, failed, waiting, running, deletable)
    finally:
        control.stop(home)
        kill_leftovers(home)


# ---- (b) schemathesis against the real daemon -----------------------------------------------------------------
def _targets(seed: Seeded, operation_id: str) -> list[str | None]:
    """Seeded jobs an operation may be pointed at (None: keep the generated user~name)."""
    if operation_id == "deleteJob":  # only the throw-away ones can go; the others answer 409
        return [None, *seed.deletable, seed.waiting, seed.running]
    if operation_id in ("setExecutionType", "streamTaskLog", "setJobMaxRunTime", "preemptJob", "setJobPriority"):
        # never stop the queue (a fuzzed max run time would, and a preemption or a lower class for the running job
        # would requeue it as a new attempt); never follow a live task
        return [None, seed.succeeded, seed.failed]
    if operation_id == "setTaskServiceState":  # never stop or start the running job's TensorBoard
        return [None, seed.succeeded, seed.failed, seed.waiting]
    return [None, seed.succeeded, seed.failed, seed.waiting, seed.running]


REAL_TASK = {"jobAttemptId": 0, "taskRoleName": "main", "taskIndex": 0, "taskAttemptId": 0}


def _aim(case: Any, seed: Seeded) -> None:
    """Point about four cases in five at a seeded job (chosen from the case itself, so a rerun picks the same)."""
    params = case.path_parameters
    if not params or "user" not in params:
        return
    key = zlib.crc32(json.dumps([params, case.query], sort_keys=True, default=str).encode())
    targets = _targets(seed, case.operation.definition.raw["operationId"])
    job = targets[key % len(targets)]
    if job is None:
        return
    params["user"], params["name"] = job.split("~", 1)
    if "taskRoleName" in params and key % 3:
        params.update({k: v for k, v in REAL_TASK.items() if k in params})


def test_every_operation_but_the_terminal_is_fuzzed() -> None:
    fuzzed = {result.ok().definition.raw["operationId"] for result in schema.get_all_operations()}
    described = {op["operationId"] for item in SPEC["paths"].values() for m, op in item.items() if m in METHODS}
    assert fuzzed == described - {TERMINAL_OPERATION} and TERMINAL_OPERATION in described


@schema.parametrize()
def test_the_daemon_conforms_to_its_spec(case: Any, seeded: Seeded) -> None:
    _aim(case, seeded)
    # (a generated header that says how the message is framed, "Content-Length: o", is refused by the HTTP server
    # before any handler sees it: transport, not the API)
    framing = ("content-length", "transfer-encoding", "host", "connection")
    case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() not in framing}
    token = seeded.api.token
    if case.operation.definition.raw["operationId"] in ("logoutV1", "logoutV2"):  # revokes the token it carries:
        token = seeded.api.http.post("/api/v2/local/users", json={"name": "fuzz-logout"}).json()["token"]  # a spare
    case.call_and_validate(base_url=seeded.api.url, headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)


# Numbers past what a task, attempt or offset can be (2**31 - 1) once reached SQLite and overflowed (500): a query
# value is now 400, a path value names nothing (404).
@pytest.mark.parametrize(
    "request_",
    [
        ("GET", "/api/v2/jobs?offset=9223372036854775808", 400),
        ("GET", "/api/v2/jobs?offset=2147483648", 400),
        ("GET", "/api/v2/jobs/{job}/attempts/9223372036854775808/taskRoles/main/taskIndex/0/attempts/0/logs", 404),
        ("GET", "/api/v2/jobs/{job}/attempts/0/taskRoles/main/taskIndex/99999999999999999999/attempts/0/logs", 404),
        ("GET", "/api/v2/jobs/{job}/attempts/0/taskRoles/main/taskIndex/0/attempts/9223372036854775808/logs", 404),
        ("GET", "/api/v2/local/logs/{job}/9223372036854775808/main/0/0/all", 404),
        ("GET", "/api/v2/local/logs/{job}/0/main/9223372036854775808/0/all", 404),
        ("GET", "/api/v2/local/logs/{job}/0/main/0/9223372036854775808/all", 404),
        ("GET", "/api/v2/local/jobs/{job}/logs/stream?index=9223372036854775808", 400),
        ("GET", "/api/v2/local/jobs/{job}/logs/stream?attempt=9223372036854775808", 400),
        ("GET", "/api/v2/local/jobs/{job}/logs/stream?index=2147483648", 400),
        ("POST", "/api/v2/local/jobs/{job}/services/main/9223372036854775808/tensorboard", 404),
        ("GET", "/api/v2/local/jobs/{job}/tasks/main/99999999999999999999/terminal", 404),
    ],
    ids=lambda r: r[1].split("{job}")[-1],
)
def test_integers_past_int32_are_refused_not_a_server_error(seeded: Seeded, request_: tuple[str, str, int]) -> None:
    method, path, status = request_
    kwargs: dict[str, Any] = {"json": {"action": "stop"}} if method == "POST" else {}
    r = seeded.api.http.request(method, path.format(job=seeded.failed), **kwargs)
    assert r.status_code == status, (r.status_code, r.text)
    codes = ("InvalidParametersError",) if status == 400 else ("NoJobError", "NoTaskLogError")
    assert r.json()["code"] in codes, r.text


# ---- (c) the main routes' answers for real jobs validate against the spec's schemas -------------------------------
JOB = "/api/v2/jobs/{user}~{name}"
LOGS = JOB + "/attempts/{jobAttemptId}/taskRoles/{taskRoleName}/taskIndex/{taskIndex}/attempts/{taskAttemptId}/logs"
LOG_FILE = "/api/v2/local/logs/{user}~{name}/{jobAttemptId}/{taskRoleName}/{taskIndex}/{taskAttemptId}/{logName}"
STREAM = "/api/v2/local/jobs/{user}~{name}/logs/stream"


@pytest.mark.parametrize("which", ["succeeded", "failed", "waiting", "running"])
def test_job_routes_answer_as_the_spec_says(seeded: Seeded, which: str) -> None:
    job = getattr(seeded, which)
    http = seeded.api.http
    detail = conforms(http.get(f"/api/v2/jobs/{job}"), JOB)
    status, task = detail["jobStatus"], detail["taskRoles"]["main"]["taskStatuses"][0]
    assert status["state"] == which.upper() and status["appId"] == job
    # the seeded failed and running jobs have the tensorboard runtime plugin: one port labelled after it
    assert set(task["containerPorts"]) == ({"tensorboard"} if which in ("failed", "running") else set())
    if which == "succeeded":
        assert status["appExitSpec"]["type"] == "USER_SUCCESS" and task["runtime"] == "process"
    elif which == "failed":
        assert status["appExitCode"] == 3 and status["appExitType"] == "Failed"
        spec = task["containerExitSpec"]  # OpenPAI's runtime reports an exit it has no pattern for as its 255
        assert (spec["code"], spec["phrase"], spec["type"], spec["reaction"]) == (
            3,
            "PAIRuntimeUnknownFailed",
            "UNKNOWN_FAILURE",
            "RETRY_TO_MAX",
        )
    elif which == "waiting":
        assert status["waitingReason"] and task["taskState"] == "WAITING" and task["containerId"] is None
        assert status["launchedTime"] is None and status["appExitSpec"] is None
    else:
        assert status["waitingReason"] is None and task["taskState"] == "RUNNING"
    assert task["containerGpuIndices"] == [] and task["containerGpus"] == 0

    attempts = conforms(http.get(f"/api/v2/jobs/{job}/job-attempts"), JOB + "/job-attempts")
    assert [a["isLatest"] for a in attempts] == [True] and attempts[0]["frameworkName"] == job
    events = conforms(http.get(f"/api/v2/jobs/{job}/events"), JOB + "/events")
    assert events["totalCount"] == len(events["data"]) and events["data"][-1]["reason"] == "Submitted"
    conforms(http.get(f"/api/v2/jobs/{job}/events", params={"type": "Warning"}), JOB + "/events")

    config = http.get(f"/api/v2/jobs/{job}/config")
    document = conforms(config, JOB + "/config")
    if which == "waiting":  # the v2 YAML one, with a secret
        assert config.headers["content-type"].startswith("text/yaml") and document["secrets"] == "******"
    else:
        assert config.headers["content-type"].startswith("text/yaml") and "jobName" in document

    for tail in (False, True):
        locations = conforms(http.get(task["containerLog"], params={"tail-mode": "true"} if tail else None), LOGS)
        # once a task started, the process runtime's notice that the image was not used is the runtime log
        runtime = set() if which == "waiting" else {"runtime"}
        assert {loc["name"] for loc in locations["locations"]} == {"stdout", "stderr", "all"} | runtime
        for loc in locations["locations"]:
            log = conforms(http.get(loc["uri"]), LOG_FILE)
            if which == "succeeded" and loc["name"] == "stderr":
                assert log == "a warning\n"
    if which in ("succeeded", "failed"):  # a finished task's stream ends by itself
        text = conforms(http.get(f"/api/v2/local/jobs/{job}/logs/stream", params={"stream": "stdout"}), STREAM)
        assert ("contract ok" if which == "succeeded" else "about to fail") in text


def test_list_info_tokens_and_login_answer_as_the_spec_says(seeded: Seeded) -> None:
    http = seeded.api.http
    items = conforms(http.get("/api/v2/jobs"), "/api/v2/jobs")
    assert isinstance(items, list) and {seeded.succeeded, seeded.waiting} <= {
        f"{j['username']}~{j['name']}" for j in items
    }
    page = conforms(
        http.get(
            "/api/v2/jobs",
            params={"withTotalCount": "true", "limit": 2, "order": "jobName,ASC", "state": "SUCCEEDED,failed"},
        ),
        "/api/v2/jobs",
    )
    assert page["totalCount"] >= 2 and len(page["data"]) == 2
    assert {j["state"] for j in page["data"]} <= {"SUCCEEDED", "FAILED"}
    listed = {f"{j['username']}~{j['name']}": j for j in conforms(http.get("/api/v2/local/jobs"), "/api/v2/local/jobs")}
    assert [s["name"] for s in listed[seeded.running]["tasks"][0]["services"]] == ["tensorboard"]
    assert listed[seeded.waiting]["tasks"][0]["taskState"] == "WAITING" and "tasks" not in listed[seeded.succeeded]
    page = conforms(http.get("/api/v2/local/jobs", params={"withTotalCount": "true", "limit": 1}), "/api/v2/local/jobs")
    assert page["totalCount"] >= 2 and len(page["data"]) == 1
    info = conforms(http.get("/api/v2/info"), "/api/v2/info")
    assert info["capacity"] == {"cpu": 2, "memoryMB": 1024, "gpu": 0} and info["used"]["cpu"] == 2
    conforms(http.get("/api/v2/tokens"), "/api/v2/tokens")
    r = http.post("/api/v2/local/users", json={"name": "contract-carol", "password": "secret-pw"})
    created = conforms(r, "/api/v2/local/users")
    for version in ("v1", "v2"):
        path = f"/api/{version}/authn/basic/login"
        logged_in = conforms(
            httpx.post(seeded.api.url + path, json={"username": "contract-carol", "password": "secret-pw"}), path
        )
        assert logged_in["user"] == created["name"] and logged_in["admin"] is False


def test_error_answers_match_the_spec(seeded: Seeded) -> None:
    api, http = seeded.api, seeded.api.http
    assert conforms(httpx.get(api.url + "/api/v2/jobs"), "/api/v2/jobs")["code"] == "UnauthorizedUserError"
    assert (
        conforms(
            httpx.post(api.url + "/api/v2/authn/basic/login", json={"username": seeded.user, "password": "nope00"}),
            "/api/v2/authn/basic/login",
        )["code"]
        == "IncorrectPasswordError"
    )
    assert conforms(http.get("/api/v2/jobs", params={"limit": 0}), "/api/v2/jobs")["code"] == "InvalidParametersError"
    assert conforms(http.get("/api/v2/jobs/nobody~nothing"), JOB)["code"] == "NoJobError"
    r = http.get(f"/api/v2/jobs/{seeded.succeeded}/attempts/0/taskRoles/nope/taskIndex/0/attempts/0/logs")
    assert conforms(r, LOGS)["code"] == "NoJobError"
    assert (
        conforms(http.get(f"/api/v2/local/logs/{seeded.succeeded}/0/main/0/7/all"), LOG_FILE)["code"]
        == "NoTaskLogError"
    )
    r = http.get(f"/api/v2/local/jobs/{seeded.succeeded}/logs/stream", params={"stream": "nope"})
    assert conforms(r, STREAM)["code"] == "InvalidParametersError"
    assert conforms(http.delete(f"/api/v2/jobs/{seeded.waiting}"), JOB)["code"] == "JobNotFinishedError"
    r = http.put(f"/api/v2/jobs/{seeded.succeeded}/executionType", json={"value": "START"})
    assert conforms(r, JOB + "/executionType")["code"] == "InvalidParametersError"
    r = http.post(f"/api/v2/jobs/{seeded.succeeded}/clone", json={"name": seeded.failed.split("~", 1)[1]})
    assert conforms(r, JOB + "/clone")["code"] == "ConflictJobError"
    # submissions: 400 with every problem, 409, 413, 415
    bad = json.dumps(
        {
            "jobName": "bad name",
            "image": "x",
            "taskRoles": [
                {"name": "main", "taskNumber": 0, "cpuNumber": 1, "memoryMB": 50, "gpuNumber": 0, "command": "true"}
            ],
        }
    )
    body = conforms(api.submit(bad), "/api/v2/jobs")
    assert body["code"] == "InvalidProtocolError" and {"jobName", "taskRoles[0].memoryMB"} <= {
        p["path"] for p in body["problems"]
    }
    too_big = conforms(api.submit(v1("too-big", "true", cpuNumber=64)), "/api/v2/jobs")
    assert too_big["code"] == "NoEnoughQuotaError"
    assert conforms(api.submit(v1("seed-ok", "true")), "/api/v2/jobs")["code"] == "ConflictJobError"
    huge = b"jobName: x\n# " + b"a" * (4 * 1024 * 1024)
    r = http.post("/api/v2/jobs", content=huge, headers={"Content-Type": "text/yaml"})
    assert conforms(r, "/api/v2/jobs")["code"] == "PayloadTooLargeError"
    r = http.post("/api/v2/jobs", content=b"<job/>", headers={"Content-Type": "application/xml"})
    assert conforms(r, "/api/v2/jobs")["code"] == "UnsupportedMediaTypeError"
    # someone else's job is as absent as a missing one; only an admin adds users
    dave = api.as_user(
        conforms(http.post("/api/v2/local/users", json={"name": "contract-dave"}), "/api/v2/local/users")["token"]
    )
    assert conforms(dave.http.get(f"/api/v2/jobs/{seeded.succeeded}/config"), JOB + "/config")["code"] == "NoJobError"
    r = dave.http.post("/api/v2/local/users", json={"name": "contract-eve"})
    assert conforms(r, "/api/v2/local/users")["code"] == "ForbiddenUserError"


# ---- (c) the task routes: services, their stop/start, metrics, the terminal ---------------------------------------
SERVICES = "/api/v2/local/jobs/{user}~{name}/services"
SERVICE = SERVICES + "/{taskRoleName}/{taskIndex}/{service}"
METRICS = "/api/v2/local/jobs/{user}~{name}/metrics"
TERMINAL = "/api/v2/local/jobs/{user}~{name}/tasks/{taskRoleName}/{taskIndex}/terminal"


def _services(seeded: Seeded, job: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in conforms(seeded.api.http.get(f"/api/v2/local/jobs/{job}/services"), SERVICES)}


def _until_service(seeded: Seeded, job: str, state: str, timeout: float = 60) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    def reached() -> dict[str, Any] | None:
        seen[:] = [_services(seeded, job)["tensorboard"]]
        return seen[0] if seen[0]["state"] == state else None

    return wait_for(
        reached, timeout, lambda: f"TensorBoard of {job} to be {state}, still {seen[0]['state']}", interval=0.2
    )


def _service_action(api: Api, job: str, action: Any, task: str = "main/0", service: str = "tensorboard") -> Any:
    return conforms(
        api.http.post(f"/api/v2/local/jobs/{job}/services/{task}/{service}", json={"action": action}), SERVICE
    )


def test_metrics_answer_as_the_spec_says(seeded: Seeded) -> None:
    """Before the services' stop/start below."""
    http = seeded.api.http
    m = conforms(http.get(f"/api/v2/local/jobs/{seeded.running}/metrics"), METRICS)
    assert m["gpu"]["available"] is Nvml().available  # NVML in this process sees what the daemon's sees
    if not m["gpu"]["available"]:  # this machine has no GPU driver
        assert "NVML" in m["gpu"]["message"]
    [task] = m["tasks"]
    assert task["role"] == "main" and task["index"] == 0 and task["state"] == "RUNNING" and task["gpus"] == []
    assert task["memoryLimitBytes"] == 768 * 2**20 and task["memoryBytes"] > 0 and task["cpuPercent"] >= 0
    for job in (seeded.waiting, seeded.succeeded):
        [task] = conforms(http.get(f"/api/v2/local/jobs/{job}/metrics"), METRICS)["tasks"]
        assert task["cpuPercent"] is None and task["memoryBytes"] is None and task["gpus"] == []
        assert task["state"] == ("WAITING" if job == seeded.waiting else "SUCCEEDED")


def test_services_and_their_stop_and_start_answer_as_the_spec_says(seeded: Seeded) -> None:
    api, job = seeded.api, seeded.running
    tb = _until_service(seeded, job, "running")  # TensorBoard takes a few seconds to answer
    ports = api.detail(job)["taskRoles"]["main"]["taskStatuses"][0]["containerPorts"]
    assert tb == {
        "role": "main",
        "index": 0,
        "name": "tensorboard",
        "host": tb["host"],
        "port": int(ports["tensorboard"]),
        "state": "running",
        "token": tb["token"],
        "basePath": "/",
        "logdir": f"{api.home}/local/jobs/{job}/output/logs/",
    }  # the job's $PAI_OUTPUT_LOGS
    runs = f"http://{tb['host']}:{tb['port']}/data/runs"
    assert isinstance(tb["token"], str) and len(tb["token"]) >= 32
    assert httpx.get(runs, timeout=10).status_code == 403  # only the proxy's credential opens it
    assert httpx.get(runs, headers={"Authorization": f"token {tb['token']}"}, timeout=10).status_code == 200
    assert _services(seeded, seeded.succeeded) == {} and _services(seeded, seeded.waiting) == {}
    assert _services(seeded, seeded.failed)["tensorboard"]["state"] == "stopped"  # its task is over

    assert _service_action(api, job, "stop") == {"role": "main", "index": 0, "name": "tensorboard", "action": "stop"}
    _until_service(seeded, job, "stopped", 15)
    assert _service_action(api, job, "start")["action"] == "start"
    _until_service(seeded, job, "running")

    assert _service_action(api, job, "restart")["code"] == "InvalidParametersError"
    assert _service_action(api, seeded.failed, "stop")["code"] == "InvalidParametersError"  # task not running
    assert _service_action(api, job, "stop", service="jupyter")["code"] == "NoJobError"  # no such service
    assert _service_action(api, job, "stop", task="main/1")["code"] == "NoJobError"  # no such task
    assert _service_action(api, job, "stop", task="nope/0")["code"] == "NoJobError"
    assert _service_action(api, "nobody~nothing", "stop")["code"] == "NoJobError"
    r = api.http.post(f"/api/v2/local/jobs/{job}/services/main/0/tensorboard", content=b"[1]")
    assert conforms(r, SERVICE)["code"] == "InvalidParametersError"


def _handshake(api: Api, path: str, token: str | None) -> httpx.Response:
    """Open the websocket at path; the refusal before the upgrade as an httpx.Response (101 once it is open)."""

    async def connect() -> httpx.Response:
        url = api.url.replace("http", "ws", 1) + path
        request = HTTPRequest(
            url, headers={"Authorization": f"Bearer {token}"} if token else {}, connect_timeout=10, request_timeout=10
        )
        try:
            ws = await websocket_connect(request)
        except HTTPClientError as exc:
            assert exc.response is not None, exc
            return httpx.Response(
                exc.code,
                headers=dict(exc.response.headers),
                content=exc.response.body,
                request=httpx.Request("GET", api.url + path),
            )
        try:  # terminado greets with ["setup", {}]; then a shell answers
            assert json.loads(await asyncio.wait_for(ws.read_message(), 10)) == ["setup", {}]
            ws.write_message(json.dumps(["stdin", "echo $((6*7))MARK\r"]))
            out = ""
            while "42MARK" not in out:
                kind, *rest = json.loads(await asyncio.wait_for(ws.read_message(), 10))
                out += rest[0] if kind == "stdout" else ""
        finally:
            ws.close()
        return httpx.Response(101, request=httpx.Request("GET", api.url + path))

    return asyncio.run(connect())


def test_terminal_handshake_answers_as_the_spec_says(seeded: Seeded) -> None:
    api = seeded.api
    path = f"/api/v2/local/jobs/{seeded.running}/tasks/main/0/terminal"
    assert _handshake(api, path, api.token).status_code == 101
    refused = _handshake(api, path, None)
    assert refused.status_code == 401 and conforms(refused, TERMINAL, "get")["code"] == "UnauthorizedUserError"
    r = _handshake(api, f"/api/v2/local/jobs/{seeded.failed}/tasks/main/0/terminal", api.token)
    assert r.status_code == 400 and conforms(r, TERMINAL, "get")["code"] == "InvalidParametersError"  # not running
    r = _handshake(api, f"/api/v2/local/jobs/{seeded.running}/tasks/main/1/terminal", api.token)
    assert r.status_code == 404 and conforms(r, TERMINAL, "get")["code"] == "NoJobError"
    r = _handshake(api, "/api/v2/local/jobs/nobody~nothing/tasks/main/0/terminal", api.token)
    assert r.status_code == 404 and conforms(r, TERMINAL, "get")["code"] == "NoJobError"
    # a plain GET is checked the same way before Tornado sees that it is no websocket upgrade
    assert conforms(httpx.get(api.url + path), TERMINAL)["code"] == "UnauthorizedUserError"
    assert "Upgrade" in conforms(api.http.get(path), TERMINAL)  # 400, Tornado's text/html
    r = api.http.get(path, headers={"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "7"})
    assert r.status_code == 426 and conforms(r, TERMINAL) == ""


def test_task_routes_refuse_strangers_and_missing_tokens(seeded: Seeded) -> None:
    """Another user's job is 404 NoJobError on every task route, and no token is 401 on each, websocket included."""
    api, job = seeded.api, seeded.running
    grace = api.as_user(
        conforms(api.http.post("/api/v2/local/users", json={"name": "contract-grace"}), "/api/v2/local/users")["token"]
    )
    anonymous = httpx.Client(base_url=api.url, timeout=30)
    for who, status, code in ((grace.http, 404, "NoJobError"), (anonymous, 401, "UnauthorizedUserError")):
        for r, path in (
            (who.get(f"/api/v2/local/jobs/{job}/services"), SERVICES),
            (who.post(f"/api/v2/local/jobs/{job}/services/main/0/tensorboard", json={"action": "stop"}), SERVICE),
            (who.get(f"/api/v2/local/jobs/{job}/metrics"), METRICS),
            (who.get(f"/api/v2/local/jobs/{job}/tasks/main/0/terminal"), TERMINAL),
        ):
            assert r.status_code == status and conforms(r, path)["code"] == code, (r.request.url, r.text)
    url = api.url.replace("http", "ws", 1) + f"/api/v2/local/jobs/{job}/tasks/main/0/terminal"

    async def upgrade(token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        (await websocket_connect(HTTPRequest(url, headers=headers, connect_timeout=10, request_timeout=10))).close()

    for token, status in ((grace.token, 404), (None, 401)):
        with pytest.raises(HTTPClientError) as refused:
            asyncio.run(upgrade(token))
        assert refused.value.code == status
    anonymous.close()
    _until_service(seeded, job, "running")  # grace's stop did nothing: a stopped one stays stopped (a busy host may
    # see it "starting" a moment while it answers slowly)


# ---- regressions of daemon bugs the contract test found -------------------------------------------------------
def test_cpu_percent_stays_positive_when_a_process_of_the_task_exits(seeded: Seeded) -> None:
    """Stops the running job's TensorBoard for good: keep this after every test that needs it."""
    api, job = seeded.api, seeded.running
    _until_service(seeded, job, "running")
    task_dir = next(api.home.rglob(f"*~{job.split('~')[1]}")) / "a0.main-0.t0"
    pid = int((task_dir / "run" / "service-tensorboard.pid").read_text())
    conforms(api.http.get(f"/api/v2/local/jobs/{job}/metrics"), METRICS)
    _service_action(api, job, "stop")
    _until_service(seeded, job, "stopped", 15)

    def reaped() -> bool:  # every look measures CPU over a window that the exit falls in or ends
        conforms(api.http.get(f"/api/v2/local/jobs/{job}/metrics"), METRICS)  # cpuPercent: minimum 0
        return not psutil.pid_exists(pid)

    wait_for(reaped, 15, "the stopped TensorBoard to be reaped", interval=0.2)
    conforms(api.http.get(f"/api/v2/local/jobs/{job}/metrics"), METRICS)  # a window from before to after it


def test_terminal_refusals_are_no_store(seeded: Seeded) -> None:
    r = httpx.get(f"{seeded.api.url}/api/v2/local/jobs/{seeded.running}/tasks/main/0/terminal")
    assert r.status_code == 401 and r.headers.get("cache-control") == "no-store", r.headers


def test_terminal_other_methods_are_method_not_allowed_errors(seeded: Seeded) -> None:
    r = seeded.api.http.post(f"/api/v2/local/jobs/{seeded.running}/tasks/main/0/terminal")
    assert r.status_code == 405 and r.headers["content-type"].startswith("application/json"), (r.headers, r.text)
    assert r.json()["code"] == "MethodNotAllowedError"


def test_spec_examples_are_accepted_as_they_are(seeded: Seeded) -> None:
    """The submit examples in the spec are real jobs: accepted (202), then queued behind the seeded waiting job."""
    examples = SPEC["components"]["examples"]
    http = seeded.api.http
    for name, ctype, dump in (("JobV2", "text/yaml", yaml.safe_dump), ("JobV1", "application/json", json.dumps)):
        doc = {**examples[name]["value"]}
        key = "name" if "protocolVersion" in doc else "jobName"
        doc[key] = f"{doc[key]}-explicit"
        r = http.post("/api/v2/jobs", content=dump(doc).encode(), headers={"Content-Type": ctype})
        assert conforms(r, "/api/v2/jobs")["name"] == doc[key]
        d = conforms(http.get(f"/api/v2/jobs/{seeded.user}~{doc[key]}"), JOB)
        assert d["jobStatus"]["state"] == "WAITING" and "ahead" in d["jobStatus"]["waitingReason"]


def test_no_fuzzed_job_ever_ran(seeded: Seeded) -> None:
    """Guard for the safety argument above: only the seeded jobs ever started a task."""
    db = sqlite3.connect(f"file:{seeded.api.home / 'local' / 'state.db'}?mode=ro", uri=True)
    started = {
        r[0]
        for r in db.execute(
            "SELECT DISTINCT j.user || '~' || j.name FROM tasks t JOIN jobs j "
            "ON j.id = t.job_id WHERE t.launched_time IS NOT NULL"
        )
    }
    db.close()
    assert started <= {seeded.succeeded, seeded.failed, seeded.running, *seeded.deletable}, started
