"""The server extension under attack: a cookie-authenticated write from a foreign Origin is a 403 as
docs/server-extension.md promises (Jupyter's own check answers 404), and no answer writes a raw ``?token=``
into Jupyter's log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.daemon import Api, v1
from tests.helpers.jupyter_fixture import JupyterServer, task_url
from tests.helpers.servers import servers
from tests.polling import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, JupyterServer, str]]:
    tmp = tmp_path_factory.mktemp("ext-hardening")
    with servers(tmp) as s:
        api = s.daemon()
        job = api.submit_ok(v1("plain", "sleep 600"))
        jupyter = s.jupyter()
        yield api, jupyter, job


def routes(job: str) -> list[str]:
    return [
        "pai/api/jobs",
        task_url(job, "jupyter/api/kernels"),
        task_url("root~nope", "jupyter/api/kernels"),
        task_url(job, "tensorboard/data"),
        task_url(job, "terminal/x"),
        f"pai/api/jobs/{job}/metrics",
        "pai/whatever",
    ]


def test_a_cookie_write_from_a_foreign_origin_is_403(served: tuple[Api, JupyterServer, str]) -> None:
    _, jupyter, job = served
    http = jupyter.http(None)
    assert http.get("api/status", params={"token": jupyter.token}).status_code == 200  # the login cookie
    for path in routes(job):
        for origin in ("http://evil.example", None):
            r = http.post(path, json={}, headers={"Origin": origin} if origin else {})
            assert r.status_code == 403, (path, origin, r.status_code)
            assert "evil" not in r.text


def test_no_answer_logs_the_raw_token(served: tuple[Api, JupyterServer, str]) -> None:
    _, jupyter, job = served
    secret = "leak-me-" + "5" * 12
    http = jupyter.http(None)
    http.get("api/status", params={"token": jupyter.token})
    for path in routes(job):
        http.post(f"{path}?token={secret}", json={}, headers={"Origin": "http://evil.example"})  # 403
    for what in ("jupyter/api/status", "tensorboard/", "nope/"):  # 404: not declared / no such service
        r = http.get(task_url(job, what), params={"token": secret})  # the cookie authenticates
        assert r.status_code == 404, (what, r.status_code)
    assert http.get(task_url("root~nope", "jupyter/x"), params={"token": secret}).status_code == 404
    wait_for(lambda: "[secret]" in jupyter.log_text(), 10, "the masked log lines")
    log = jupyter.log_text()
    assert "[secret]" in log  # the lines were written, masked
    assert secret not in log
