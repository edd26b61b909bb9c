"""A task's Jupyter link opens JupyterLab directly, and once the task has ended the browser gets
a readable page that says so (escaped), not a raw JSON 409."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.client import Client
from tests.helpers.jupyter_fixture import services_job, task_url
from tests.helpers.servers import servers
from tests.polling import wait_for

PAGE = {"Accept": "text/html,application/xhtml+xml"}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[object, object]]:
    home = tmp_path / "home"
    monkeypatch.setenv("PAI_JUPYTER_HOME", str(home))
    with servers(tmp_path) as s:
        api = s.daemon()
        jupyter = s.jupyter()
        yield api, jupyter


def test_jupyter_link_opens_lab_and_says_when_the_task_has_ended(env: tuple[object, object]) -> None:
    api, jupyter = env
    pai = Client()
    job = api.submit_ok(services_job("lablink", jupyter=True))  # type: ignore[attr-defined]
    wait_for(lambda: [s for s in pai.services(job) if s.state == "running"], 120, "the task's Jupyter")
    http = jupyter.http()  # type: ignore[attr-defined]
    first = http.get(task_url(job, "jupyter/"), headers=PAGE)
    assert first.status_code == 302, first.text
    assert first.headers["Location"] == f"/{task_url(job, 'jupyter/lab')}"
    lab = http.get(first.headers["Location"].lstrip("/"), headers=PAGE)
    assert lab.status_code == 200 and "JupyterLab" in lab.text and "A Jupyter Server is running" not in lab.text

    api.stop(job)  # type: ignore[attr-defined]
    api.wait(job)  # type: ignore[attr-defined]
    ended = wait_for(
        lambda: (r := http.get(task_url(job, "jupyter/lab"), headers=PAGE)).status_code == 409 and r,
        60,
        "409 once the task has ended",
    )
    assert ended.headers["Content-Type"].startswith("text/html")
    assert f"Jupyter of {job} main[0] is not running" in ended.text and "cannot start" in ended.text
    assert "{" not in ended.text  # no JSON, no template left over
    api_call = http.get(task_url(job, "jupyter/api/status"))  # a program still gets JSON
    assert api_call.status_code == 409 and api_call.json()["code"] == "NotRunning"
