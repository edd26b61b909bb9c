"""The job page's tools (``pai_jupyter/server/lab_tools.py``) against a real daemon and a real ``jupyter
server``: "set work duration" stops the job with the reason after the new limit; the job's SSH key downloads
for its owner only; ``access`` says which tools a job has; cookie writes need ``_xsrf``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from pai_jupyter.protocol.rules import run_time_problem
from tests.helpers.daemon import Api, v1
from tests.helpers.jupyter_fixture import JupyterServer
from tests.helpers.servers import servers
from tests.helpers.ssh import need_sshd

pytestmark = pytest.mark.slow


@dataclass
class Env:
    api: Api
    bob: Api
    jupyter: JupyterServer


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("lab-tools")
    with servers(tmp) as s:
        api = s.daemon()
        bob = api.new_user("bob")
        jupyter = s.jupyter()
        yield Env(api, bob, jupyter)


def _ssh_job(name: str) -> str:
    return yaml.safe_dump(
        {
            "protocolVersion": 2,
            "name": name,
            "type": "job",
            "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "pai-test/busybox:latest"}],
            "taskRoles": {
                "main": {
                    "instances": 1,
                    "dockerImage": "img",
                    "commands": ["sleep 300"],
                    "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
                }
            },
            "extras": {"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh", "parameters": {"jobssh": True}}]},
        }
    )


def test_set_work_duration_stops_the_job_with_the_reason(env: Env) -> None:
    http = env.jupyter.http()
    job = env.api.submit_ok(v1("lab-limit", "sleep 300"))
    env.api.wait(job, ("RUNNING",), timeout=60)
    for bad in ({"minutes": 0}, {"minutes": "3"}, {}, {"minutes": True}, {"minutes": 10**9}):
        r = http.put(f"pai/api/jobs/{job}/maxRunTime", json=bad)
        assert r.status_code == 400, bad
        assert str(run_time_problem(bad.get("minutes"))) in r.json()["message"]  # the document's rule and words
    cookie = env.jupyter.http(None)
    assert cookie.get("api/status", params={"token": env.jupyter.token}).status_code == 200
    assert cookie.put(f"pai/api/jobs/{job}/maxRunTime", json={"minutes": 0.02}).status_code == 403  # no _xsrf
    r = http.put(f"pai/api/jobs/{job}/maxRunTime", json={"minutes": 0.02})
    assert r.status_code == 200, r.text
    assert r.json()["minutes"] == 0.02 and r.json()["deadline"]
    d = env.api.wait(job, timeout=60)
    assert d["jobStatus"]["state"] == "STOPPED"
    assert "max run time of 0.02 minutes" in d["jobStatus"]["appExitDiagnostics"]
    assert http.put(f"pai/api/jobs/{job}/maxRunTime", json={"minutes": 5}).status_code == 409  # ended
    bobs = env.bob.submit_ok(v1("bob-limit", "sleep 300"))
    assert http.put(f"pai/api/jobs/{bobs}/maxRunTime", json={"minutes": 0.02}).status_code == 404
    assert env.jupyter.http(None).put(f"pai/api/jobs/{bobs}/maxRunTime", json={"minutes": 1}).status_code == 403
    env.bob.stop(bobs)
    assert env.api.wait(bobs, timeout=60)["jobStatus"]["appExitDiagnostics"] == "stopped by bob"


def test_ssh_key_download_and_access(env: Env) -> None:
    need_sshd()
    http = env.jupyter.http()
    job = env.api.submit_ok(_ssh_job("lab-ssh"))
    plain = env.api.submit_ok(v1("lab-plain", "sleep 300"))
    env.api.wait(job, ("RUNNING",), timeout=60)
    env.api.wait(plain, ("RUNNING",), timeout=60)
    access = http.get(f"pai/api/jobs/{job}/access").json()
    assert access["sshKey"] == f"/pai/api/jobs/{job}/ssh-key" and access["desktops"] == []
    key = http.get(access["sshKey"].lstrip("/"))
    assert key.status_code == 200, key.text
    assert key.text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert "attachment" in key.headers["Content-Disposition"] and key.headers["Cache-Control"] == "no-store"
    assert http.get(f"pai/api/jobs/{plain}/access").json() == {"sshKey": None, "desktops": [], "message": None}
    assert http.get(f"pai/api/jobs/{plain}/ssh-key").status_code == 404  # no ssh plugin, no key
    assert env.jupyter.http(None).get(f"pai/api/jobs/{job}/ssh-key").status_code == 403
    bobs = env.bob.submit_ok(_ssh_job("bob-ssh"))
    assert http.get(f"pai/api/jobs/{bobs}/ssh-key").status_code == 404  # someone else's job
    assert http.get(f"pai/api/jobs/{bobs}/access").status_code == 404
    for j, who in ((job, env.api), (plain, env.api), (bobs, env.bob)):
        who.stop(j)
        who.wait(j, timeout=60)
