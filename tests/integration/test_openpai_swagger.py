"""OpenPAI's own swagger (tests/data/openpai/swagger.yaml, 2.2.7), restricted to the routes we serve, checked
against the daemon: for real jobs (succeeded, failed, running) every served operation answers a status the
swagger lists, with a body that validates against the swagger's schema for it. Where we answer differently on
purpose the docs/openpai.md says so; those are the DIFFERENCES below (and nothing else
may differ)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml

from pai_jupyter.cluster import control
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1

DATA = Path(__file__).resolve().parent.parent / "data" / "openpai"
SWAGGER: dict[str, Any] = yaml.safe_load((DATA / "swagger.yaml").read_text())
PROTOCOL: dict[str, Any] = yaml.safe_load((DATA / "protocol-schema.yaml").read_text())
# the swagger names the protocol schema by a remote URL; the same file is here
SWAGGER["components"]["schemas"].update(PROTOCOL["components"]["schemas"])
SERVED = {  # swagger path -> methods we serve there (see docs/openpai.md: the routes we do not serve, and why)
    "/api/v2/info": {"get"},
    "/api/v2/tokens": {"get"},
    "/api/v2/tokens/application": {"post"},
    "/api/v2/tokens/{token}": {"delete"},
    "/api/v2/authn/basic/login": {"post"},
    "/api/v2/authn/basic/logout": {"delete"},
    "/api/v2/users": {"get"},
    "/api/v2/users/{user}": {"get"},
    "/api/v2/virtual-clusters": {"get"},
    "/api/v2/storages": {"get"},
    "/api/v2/storages/{storage}": {"get"},
    "/api/v2/groups": {"get"},
    "/api/v2/groups/{group}": {"get"},
    "/api/v2/groups/{group}/userlist": {"get"},
    "/api/v2/kubernetes/nodes": {"get"},
    "/api/v2/virtual-clusters/{vc}": {"get"},
    "/api/v2/jobs": {"get", "post"},
    "/api/v2/jobs/{user}~{job}": {"get"},
    "/api/v2/jobs/{user}~{job}/attempts/{jobAttemptId}": {"get"},
    "/api/v2/jobs/{user}~{job}/config": {"get"},
    "/api/v2/jobs/{user}~{job}/executionType": {"put"},
    "/api/v2/jobs/{user}~{job}/tag": {"put", "delete"},
    "/api/v2/jobs/{user}~{job}/events": {"get"},
    "/api/v2/jobs/{user}~{job}/job-attempts/healthz": {"get"},
    "/api/v2/jobs/{user}~{job}/job-attempts": {"get"},
    "/api/v2/jobs/{user}~{job}/job-attempts/{attemptIndex}": {"get"},
    "/api/v2/jobs/{user}~{job}/attempts/{jobAttemptId}/taskRoles/{taskRoleName}/taskIndex/{taskIndex}/attempts": {
        "get"
    },
    "/api/v2/jobs/{user}~{job}/attempts/{jobAttemptId}/taskRoles/{taskRoleName}/taskIndex/{taskIndex}/attempts/"
    "{taskAttemptId}/logs": {"get"},
}
# Where the swagger and OpenPAI's server code disagree, the code is what clusters answer, and so do we:
# (a regular expression over the failing value's path, why).
CODE_WINS = [
    (r"/containerGpus$", "the server sends an int bitmask (frameworkConverter.getContainerGpus), the swagger a string"),
]
# Deliberate differences (docs/openpai.md): none in the shapes
DIFFERENCES: list[tuple[str, str]] = []


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 to JSON Schema: ``nullable`` becomes a null branch, refs point into the swagger."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k not in ("nullable", "example", "examples", "xml")}
    if "$ref" in out:
        out["$ref"] = "#/definitions/" + out["$ref"].rsplit("/", 1)[1]
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


DEFINITIONS = {name: _json_schema(s) for name, s in SWAGGER["components"]["schemas"].items()}


def _responses(path: str, method: str) -> dict[str, Any]:
    out = {}
    for status, response in SWAGGER["paths"][path][method]["responses"].items():
        while "$ref" in response:
            response = SWAGGER["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
        out[status] = response
    return out


def check(r: httpx.Response, path: str) -> Any:
    """The answer's status is one the swagger lists for the operation, and its JSON body fits that schema."""
    method = r.request.method.lower()
    responses = _responses(path, method)
    assert str(r.status_code) in responses, f"{method} {path}: {r.status_code} is not in the swagger: {r.text[:200]}"
    content = responses[str(r.status_code)].get("content") or {}
    schema = (content.get("application/json") or {}).get("schema")
    if schema is None:
        return r.text
    body = r.json()
    validator = jsonschema.Draft7Validator({**_json_schema(schema), "definitions": DEFINITIONS})
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(body)
        if not any(
            re.search(pattern, "/" + "/".join(map(str, e.absolute_path))) for pattern, _ in CODE_WINS + DIFFERENCES
        )
    ]
    assert not errors, f"{method} {path} {r.status_code}:\n" + "\n".join(errors[:15])
    return body


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, dict[str, str]]]:
    home = tmp_path_factory.mktemp("swagger-home")
    api = start_daemon(home)
    jobs = {
        "succeeded": api.submit_ok(v1("sw-ok", "echo ok")),
        "failed": api.submit_ok(v1("sw-failed", "exit 4")),
        "running": api.submit_ok(v1("sw-running", "sleep 300")),
    }
    api.wait(jobs["succeeded"])
    api.wait(jobs["failed"])
    api.wait(jobs["running"], ("RUNNING",))
    yield api, jobs
    control.stop(home)
    kill_leftovers(home)


def test_the_served_swagger_paths_are_routes_of_the_daemon() -> None:
    from pai_jupyter.cluster.http.app import make_app

    rules = [re.compile(rule.matcher.regex.pattern) for rule in make_app(None).wildcard_router.rules]  # type: ignore[arg-type]
    for path, methods in SERVED.items():
        assert methods <= set(SWAGGER["paths"][path]), path
        concrete = re.sub(r"\{[^}]+\}", "0", path).replace("0~0", "a~b")
        assert any(r.match(concrete) for r in rules), path


@pytest.mark.parametrize("which", ["succeeded", "failed", "running"])
def test_job_routes_answer_in_the_swaggers_shapes(cluster: tuple[Api, dict[str, str]], which: str) -> None:
    api, jobs = cluster
    job = jobs[which]
    http = api.http
    base = "/api/v2/jobs/{user}~{job}"
    check(http.get("/api/v2/jobs"), "/api/v2/jobs")
    check(http.get("/api/v2/jobs", params={"withTotalCount": "true"}), "/api/v2/jobs")
    check(http.get(f"/api/v2/jobs/{job}"), base)
    check(http.get(f"/api/v2/jobs/{job}/attempts/0"), base + "/attempts/{jobAttemptId}")
    check(http.get(f"/api/v2/jobs/{job}/events"), base + "/events")
    check(http.get(f"/api/v2/jobs/{job}/job-attempts"), base + "/job-attempts")
    check(http.get(f"/api/v2/jobs/{job}/job-attempts/0"), base + "/job-attempts/{attemptIndex}")
    check(http.get(f"/api/v2/jobs/{job}/job-attempts/healthz"), base + "/job-attempts/healthz")
    task = base + "/attempts/{jobAttemptId}/taskRoles/{taskRoleName}/taskIndex/{taskIndex}/attempts"
    check(http.get(f"/api/v2/jobs/{job}/attempts/0/taskRoles/main/taskIndex/0/attempts"), task)
    logs = check(
        http.get(f"/api/v2/jobs/{job}/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs"),
        task + "/{taskAttemptId}/logs",
    )
    assert {loc["name"] for loc in logs["locations"]} >= {"stdout", "stderr", "all"}
    config = http.get(f"/api/v2/jobs/{job}/config")
    assert config.status_code == 200 and config.headers["content-type"].startswith("text/yaml")
    check(http.put(f"/api/v2/jobs/{job}/tag", json={"value": "t1"}), base + "/tag")
    check(http.request("DELETE", f"/api/v2/jobs/{job}/tag", json={"value": "t1"}), base + "/tag")
    check(http.get("/api/v2/jobs/nobody~nothing"), base)


def test_cluster_routes_answer_in_the_swaggers_shapes(cluster: tuple[Api, dict[str, str]]) -> None:
    api, jobs = cluster
    http = api.http
    check(httpx.get(api.url + "/api/v2/info"), "/api/v2/info")
    me = http.get("/api/v2/info").json()["user"]
    check(http.get("/api/v2/virtual-clusters"), "/api/v2/virtual-clusters")
    check(http.get("/api/v2/virtual-clusters/default"), "/api/v2/virtual-clusters/{vc}")
    check(http.get("/api/v2/storages"), "/api/v2/storages")
    check(http.get("/api/v2/storages", params={"default": "true"}), "/api/v2/storages")
    # the swagger's own NoStorageError response has a code its Response schema's enum lacks: OpenPAI's code wins
    missing = http.get("/api/v2/storages/nfs")
    assert (missing.status_code, missing.json()["code"]) == (404, "NoStorageError")
    check(http.get("/api/v2/groups"), "/api/v2/groups")
    check(http.get("/api/v2/groups/default"), "/api/v2/groups/{group}")
    check(http.get("/api/v2/groups/admingroup/userlist"), "/api/v2/groups/{group}/userlist")
    check(http.get("/api/v2/kubernetes/nodes"), "/api/v2/kubernetes/nodes")
    check(http.get("/api/v2/users"), "/api/v2/users")
    check(http.get(f"/api/v2/users/{me}"), "/api/v2/users/{user}")
    check(http.get("/api/v2/tokens"), "/api/v2/tokens")
    app = check(http.post("/api/v2/tokens/application"), "/api/v2/tokens/application")
    assert app["application"] is True
    basic = httpx.BasicAuth(me, app["token"])  # OpenPAI takes an application token so too
    assert httpx.get(api.url + "/api/v2/jobs", auth=basic).status_code == 200
    for r in (  # but it may not make or list tokens
        httpx.post(api.url + "/api/v2/tokens/application", auth=basic),
        httpx.get(api.url + "/api/v2/tokens", headers={"Authorization": f"Bearer {app['token']}"}),
    ):
        assert (r.status_code, r.json()["code"]) == (403, "ForbiddenUserError")
    http.post("/api/v2/local/users", json={"name": "swagger-sam", "password": "sam-pass-1"})
    login = check(
        httpx.post(
            api.url + "/api/v2/authn/basic/login",
            data={"username": "swagger-sam", "password": "sam-pass-1", "expiration": 3600},
        ),
        "/api/v2/authn/basic/login",
    )
    sam = {"Authorization": f"Bearer {login['token']}"}
    check(
        httpx.post(api.url + "/api/v2/authn/basic/login", data={"username": "swagger-sam", "password": "wrongpw"}),
        "/api/v2/authn/basic/login",
    )
    check(httpx.delete(api.url + "/api/v2/authn/basic/logout", headers=sam), "/api/v2/authn/basic/logout")
    check(
        http.put(f"/api/v2/jobs/{jobs['running']}/executionType", json={"value": "STOP"}),
        "/api/v2/jobs/{user}~{job}/executionType",
    )
    submitted = http.post(
        "/api/v2/jobs",
        content=json.dumps(
            {
                "protocolVersion": 2,
                "name": "sw_v2",
                "type": "job",
                "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "pai-test/busybox:latest"}],
                "taskRoles": {
                    "main": {
                        "dockerImage": "img",
                        "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
                        "commands": ["true"],
                    }
                },
            }
        ).encode(),
        headers={"Content-Type": "text/yaml"},
    )
    check(submitted, "/api/v2/jobs")
