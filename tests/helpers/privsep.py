"""The privilege separation tests' attack: a job that plants links and files in its task directory for the daemon
to read or serve, everything the daemon then serves of it, what root's decoy file holds, and the mark of the tests
that need root."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.daemon import Api
from tests.helpers.jobdocs import v2_doc, v2_role

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="isolation by OS accounts needs a daemon run as root")

DECOY_TEXT = "decoy: root's file, untouched\n"


def plant_job(name: str, script: str, instances: int = 1) -> str:
    """A job whose ``main`` task(s) run ``script``, with a TensorBoard service (its files are the task's too)."""
    role = v2_role(
        instances=instances, resourcePerInstance={"cpu": 1, "memoryMB": 256, "gpu": 0}, commands=script.splitlines()
    )
    doc = v2_doc(
        {"main": role},
        name=name,
        prerequisites=[{"name": "img", "type": "dockerimage", "uri": "pai-test/busybox"}],
        extras={"com.microsoft.pai.runtimeplugin": [{"plugin": "tensorboard"}]},
    )
    return json.dumps(doc)


def _first_bytes(api: Api, uri: str, limit: int) -> str:
    """At most ``limit`` bytes of what ``uri`` serves (a log may be a huge file the task planted)."""
    got = b""
    with api.http.stream("GET", uri) as r:
        for chunk in r.iter_bytes():
            got += chunk
            if len(got) >= limit:
                break
    return got.decode("utf-8", "replace")


def served_everything(api: Api, job: str, indices: tuple[int, ...] = (0,), limit: int = 1 << 20) -> str:
    """Every log the daemon serves for the ``main`` tasks ``indices`` (each whole log's first ``limit`` bytes), the
    job's services and a stop and start of each TensorBoard among them: what the daemon read or wrote."""
    served = []
    d = api.detail(job)
    attempt = d["jobStatus"]["attemptId"]
    for index in indices:
        r = api.http.get(f"/api/v2/jobs/{job}/attempts/{attempt}/taskRoles/main/taskIndex/{index}/attempts/0/logs")
        assert r.status_code == 200, r.text
        for loc in r.json()["locations"]:
            served.append(_first_bytes(api, loc["uri"], limit))
            served.append(api.http.get(loc["uri"] + "&tail-mode=true").text)
    r = api.http.get(f"/api/v2/local/jobs/{job}/services")
    assert r.status_code == 200, r.text
    served.append(r.text)
    boards = [s["index"] for s in r.json() if s["name"] == "tensorboard" and s["index"] in indices]
    assert boards, r.text
    for index in boards:
        for action in ("stop", "start"):
            r = api.http.post(f"/api/v2/local/jobs/{job}/services/main/{index}/tensorboard", json={"action": action})
            assert r.status_code == 202, r.text
    return "\n".join(served)
