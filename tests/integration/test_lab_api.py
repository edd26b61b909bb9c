"""The server routes the JupyterLab panel draws from (``pai_jupyter/server/lab_api.py`` and the job list's
conditional requests), against a real daemon and a real ``jupyter server``: one job's detail, config, log tail
and full log, stop / clone / delete, server-side validation and submission; only the profile user's jobs;
cookie-authenticated writes need ``_xsrf``; an unchanged job list is a bodiless 304."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.daemon import Api, v1
from tests.helpers.jupyter_fixture import JupyterServer, services_job
from tests.helpers.servers import servers

pytestmark = pytest.mark.slow
MARKUP = "<script>alert(1)</script>"


@dataclass
class Env:
    api: Api
    jupyter: JupyterServer
    done: str
    bobs: str


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("lab-api")
    with servers(tmp) as s:
        api = s.daemon()
        done = api.submit_ok(v1("api-done", f"echo out-line; echo '{MARKUP}' >&2; seq 1 20000"))
        bob = api.new_user("bob")
        bobs = bob.submit_ok(services_job("bobs"))
        jupyter = s.jupyter()
        api.wait(done, timeout=60)
        yield Env(api, jupyter, done, bobs)


def test_detail_config_and_logs_of_an_own_job(env: Env) -> None:
    http = env.jupyter.http()
    d = http.get(f"pai/api/jobs/{env.done}", params={"events": "1"})
    assert d.status_code == 200, d.text
    body = d.json()
    assert body["state"] == "SUCCEEDED" and body["final"] and body["tasks"][0]["role"] == "main"
    assert body["tasks"][0]["exitCode"] == 0 and body["tasks"][0]["terminalPage"] is None  # ended: no services
    assert isinstance(body["events"], list)
    # a cluster that tracks nothing (the test daemons' default): no run, and the page says how to turn tracking on
    assert body["mlflowPage"] is None and "pai_jupyter[mlflow]" in body["mlflowHint"], body
    yaml_text = http.get(f"pai/api/jobs/{env.done}/config").json()["text"]
    assert "jobName: api-done" in yaml_text
    as_json = json.loads(http.get(f"pai/api/jobs/{env.done}/config", params={"format": "json"}).json()["text"])
    assert as_json["jobName"] == "api-done"
    assert http.get(f"pai/api/jobs/{env.done}/config", params={"format": "xml"}).status_code == 400
    v2 = env.api.submit_ok(
        "protocolVersion: 2\nname: api-v2\ntype: job\nprerequisites:\n"
        "  - {name: image, type: dockerimage, uri: python:3.11}\ntaskRoles:\n  main:\n"
        "    instances: 1\n    dockerImage: image\n"
        "    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}\n    commands: [echo v2]\n"
    )
    as_v1 = json.loads(http.get(f"pai/api/jobs/{v2}/config", params={"format": "v1"}).json()["text"])
    assert as_v1["jobName"] == "api-v2" and as_v1["taskRoles"][0]["command"] == "echo v2"  # Clone to form
    tail = http.get(f"pai/api/jobs/{env.done}/log", params={"role": "main", "index": 0, "stream": "stdout"})
    assert tail.status_code == 200 and tail.headers["Content-Type"].startswith("application/json")
    text = tail.json()["text"]
    assert text.rstrip().endswith("20000") and "out-line" not in text and len(text) <= 16 * 1024  # only the tail
    stderr = http.get(f"pai/api/jobs/{env.done}/log", params={"role": "main", "stream": "stderr"})
    assert MARKUP in stderr.json()["text"] and "<script" not in stderr.text  # JSON with < escaped
    full = http.get(f"pai/api/jobs/{env.done}/log", params={"role": "main", "stream": "stdout", "full": "1"})
    assert full.status_code == 200 and full.text.startswith("out-line\n1\n2\n") and full.text.rstrip().endswith("20000")
    assert "attachment" in full.headers["Content-Disposition"] and full.headers["X-Content-Type-Options"] == "nosniff"
    assert http.get(f"pai/api/jobs/{env.done}/log", params={"stream": "nope"}).status_code == 400


def test_other_users_jobs_and_anonymous_calls_are_refused(env: Env) -> None:
    http = env.jupyter.http()
    for path in (
        f"pai/api/jobs/{env.bobs}",
        f"pai/api/jobs/{env.bobs}/config",
        f"pai/api/jobs/{env.bobs}/log",
        "pai/api/jobs/root~nosuchjob",
    ):
        assert http.get(path).status_code == 404, path
    assert http.post(f"pai/api/jobs/{env.bobs}/stop").status_code == 404
    assert http.delete(f"pai/api/jobs/{env.bobs}").status_code == 404
    anon = env.jupyter.http(None)
    assert anon.get(f"pai/api/jobs/{env.done}").status_code == 403
    assert anon.post("pai/api/validate", json={"text": "{}"}).status_code == 403
    cookie = env.jupyter.http(None)
    assert cookie.get("api/status", params={"token": env.jupyter.token}).status_code == 200  # login cookie
    assert cookie.post(f"pai/api/jobs/{env.done}/clone", json={}).status_code == 403  # no _xsrf: forged
    assert env.api.detail(env.bobs)["jobStatus"]["state"] != "STOPPED"


def test_validate_answers_problems_with_paths_and_submits(env: Env) -> None:
    http = env.jupyter.http()
    bad = json.loads(v1("form-bad", "true", memoryMB=0))
    r = http.post("pai/api/validate", json={"text": json.dumps(bad)})
    assert r.status_code == 200 and not r.json()["valid"]
    assert {"path": "taskRoles[0].memoryMB", "field": "roles.0.memory"}.items() <= r.json()["problems"][0].items()
    assert http.get("pai/api/jobs/root~form-bad").status_code == 404  # nothing submitted
    assert http.post("pai/api/validate", json={"text": "a: [unclosed"}).json()["valid"] is False
    assert http.post("pai/api/validate", json={"nottext": 1}).status_code == 400
    ok = http.post("pai/api/validate", json={"text": v1("form-ok", "echo fine"), "submit": True})
    assert ok.status_code == 201 and ok.json()["id"] == "root~form-ok"
    again = http.post("pai/api/validate", json={"text": v1("form-ok", "echo fine"), "submit": True})
    # a valid job the cluster refuses: said so, beside the field it is about (the job name)
    assert again.json()["valid"] is True and again.json()["refused"] is True
    assert "form-ok" in again.json()["problems"][0]["message"] and again.json()["problems"][0]["field"] == "name"
    assert env.api.wait("root~form-ok", timeout=60)["jobStatus"]["state"] == "SUCCEEDED"


def test_stop_clone_delete(env: Env) -> None:
    http = env.jupyter.http()
    job = env.api.submit_ok(v1("to-stop", "sleep 600"))
    env.api.wait(job, ("RUNNING",), timeout=60)
    listed = {j["id"]: j for j in http.get("pai/api/jobs").json()["jobs"]}[job]
    assert listed["tasks"][0]["terminalPage"] == f"/pai/jobs/{job}/main/0/terminal/"  # the page every link opens
    assert http.get(f"pai/api/jobs/{job}").json()["tasks"][0]["terminalPage"] == f"/pai/jobs/{job}/main/0/terminal/"
    assert http.post(f"pai/api/jobs/{job}/stop").status_code == 200
    assert env.api.wait(job, timeout=60)["jobStatus"]["state"] == "STOPPED"
    clone = http.post(f"pai/api/jobs/{job}/clone", json={"name": "cloned-one"})
    assert clone.status_code == 201 and clone.json()["id"] == "root~cloned-one"
    http.post("pai/api/jobs/root~cloned-one/stop")
    assert http.delete(f"pai/api/jobs/{job}").status_code == 200
    assert http.get(f"pai/api/jobs/{job}").status_code == 404


def test_an_unchanged_job_list_is_a_304(env: Env) -> None:
    http = env.jupyter.http()
    for job in http.get("pai/api/jobs").json()["jobs"]:  # nothing changes while the ETag is compared
        env.api.wait(job["id"], timeout=60)
    first = http.get("pai/api/jobs")
    etag = first.headers.get("ETag")
    assert first.status_code == 200 and etag
    again = http.get("pai/api/jobs", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    env.api.submit_ok(v1("a-new-one", "true"))
    changed = http.get("pai/api/jobs", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and "a-new-one" in changed.text
    row = changed.json()["jobs"][0]
    assert {"retries", "launchedTime", "completedTime", "virtualCluster"} <= set(row)
