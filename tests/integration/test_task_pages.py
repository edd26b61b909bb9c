"""A task's pages through the Jupyter server once their job has changed under them (server/sandbox.py,
server/proxy.py): a capability names one job, not its name (a job deleted and submitted again under the same name
is another job, as for log tokens), and the page of a task that stopped says so instead of failing with a 500."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from pai_jupyter.client import Client
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import JupyterServer, services_job, services_up, task_url, write_events
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = pytest.mark.slow
NAVIGATE = {"Sec-Fetch-Mode": "navigate", "Accept": "text/html"}  # what a browser opening the page sends


@dataclass
class Env:
    api: Api
    pai: Client
    jupyter: JupyterServer
    cached: JupyterServer  # keeps a service's address for a minute: a stopped task's stays there meanwhile
    logdir: Path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("task-pages")
    with servers(tmp) as s:
        api = s.daemon()
        jupyter = s.jupyter()
        cached = s.jupyter({"resolve_cache_seconds": 60}, name="jupyter-cached")
        yield Env(api, Client(home=s.home), jupyter, cached, write_events(tmp / "tb"))


def capability(http: httpx.Client, job: str, service: str, rest: str) -> str:
    """The path (from the server's root) a signed-in browser opening ``rest`` of the service is sent to."""
    r = http.get(task_url(job, f"{service}/{rest}"), headers=NAVIGATE)
    assert r.status_code == 302 and "/~" in r.headers["Location"], (r.status_code, r.text[:300])
    return str(r.headers["Location"]).lstrip("/")


def test_a_capability_does_not_open_a_job_submitted_again_under_its_name(env: Env) -> None:
    """A capability was bound to ``user~name/role/index/service``: issued for a job, it stayed good for 24 h on
    another job submitted under the same name after the first was deleted."""
    job = env.api.submit_ok(services_job("cap-again", tensorboard=str(env.logdir)))
    services_up(env.pai, job, ("tensorboard",))
    page = capability(env.jupyter.http(), job, "tensorboard", "")
    runs = page + "data/runs"
    anonymous = env.jupyter.http(None)  # the sandboxed page's own requests carry no login: the capability is it
    first = wait_for(lambda: (r := anonymous.get(runs)).status_code == 200 and "run_a" in r.text and r, 60, "runs")
    assert isinstance(first, httpx.Response) and first.json() == ["run_a"]
    assert env.api.stop(job).status_code == 202
    env.api.wait(job)
    assert env.api.http.delete(f"/api/v2/jobs/{job}").status_code == 200
    assert env.api.submit_ok(services_job("cap-again", tensorboard=str(env.logdir))) == job
    services_up(env.pai, job, ("tensorboard",))
    wait_for(lambda: "run_a" in env.jupyter.http().get(task_url(job, "tensorboard/data/runs")).text, 60, "runs")
    refused = anonymous.get(runs)
    assert refused.status_code == 403 and refused.json()["code"] == "Expired", refused.text[:300]
    again = env.jupyter.http().get(page, headers=NAVIGATE)  # a signed-in reload gets one for the new job
    assert again.status_code == 302 and again.headers["Location"].lstrip("/") != page
    assert anonymous.get(again.headers["Location"].lstrip("/") + "data/runs").json() == ["run_a"]
    env.api.stop(job)


def test_the_page_of_a_task_that_stopped_says_it_is_not_running(env: Env) -> None:
    """The server still had the stopped task's address (``resolve_cache_seconds``): the refused connection was a
    500, with or without a capability. Now the cluster is asked again and the answer is the "not running" page."""
    job = env.api.submit_ok(services_job("page-stops", jupyter=True))
    services_up(env.pai, job, ("jupyter",))
    http, anonymous = env.cached.http(), env.cached.http(None)
    page = capability(http, job, "jupyter", "lab")
    assert anonymous.get(page, headers={"Accept": "text/html"}).status_code == 200
    assert env.api.stop(job).status_code == 202
    env.api.wait(job)
    for client, path in ((anonymous, page), (http, task_url(job, "jupyter/lab"))):
        r = client.get(path, headers={"Accept": "text/html"})
        assert r.status_code == 409, (path, r.status_code, r.text[:300])
        assert r.headers["Content-Type"].startswith("text/html") and "is not running" in r.text
    api = http.get(task_url(job, "jupyter/api/status"))  # not a page: the same refusal, as JSON
    assert api.status_code == 409 and api.json()["code"] == "NotRunning"
