"""The browser page of a task's terminal: ``{base_url}pai/jobs/{user}~{job}/{role}/{index}/terminal/``
in a plain Jupyter Server under JupyterHub's kind of prefix: headless Chromium types ``echo $((6*7))`` into the
xterm.js page and sees 42; the page is behind the login, only for the profile user's own tasks, and no
request of it leaves the prefix."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pai_jupyter.server.terminal_page import built
from tests.helpers.browser import opened
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import JupyterServer, services_job
from tests.helpers.servers import servers

pytestmark = pytest.mark.slow
PREFIX = "/user/tester/"


@dataclass
class Env:
    api: Api
    jupyter: JupyterServer
    job: str
    bobs: str


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    if not built():
        pytest.fail("pai_jupyter/server/static/terminal/terminal.js is missing: build the package (pip install -e .)")
    tmp = tmp_path_factory.mktemp("terminal-page")
    with servers(tmp) as s:
        api = s.daemon()
        job = api.submit_ok(services_job("term"))
        bob = api.new_user("bob")
        bobs = bob.submit_ok(services_job("bobs"))
        jupyter = s.jupyter(base_url=PREFIX)
        api.wait(job, ("RUNNING",), timeout=60)
        yield Env(api, jupyter, job, bobs)


def test_the_page_runs_a_command_in_the_task(env: Env, browser: Any) -> None:
    with opened(browser, shot="terminal-page") as w:
        page = w.page
        page.goto(f"{env.jupyter.url}pai/jobs/{env.job}/main/0/terminal/?token={env.jupyter.token}")
        page.get_by_role("status").filter(has_text="Connected").wait_for(timeout=60_000)
        assert page.title() == f"Terminal: main[0] of {env.job}"
        page.locator(".xterm").click()
        page.keyboard.type("echo $((6*7))")
        page.keyboard.press("Enter")
        page.wait_for_function(
            """() => [...document.querySelectorAll('.xterm-rows > div')]
                                    .some(row => row.textContent.trim() === '42')""",
            timeout=30_000,
        )
    assert not w.failed, w.failed
    assert w.paths and all(p.startswith(PREFIX.lstrip("/")) for p in w.paths), w.paths  # never leaves the prefix


def test_the_page_is_for_the_logged_in_owner_only(env: Env) -> None:
    anon = env.jupyter.http(None)
    page = f"pai/jobs/{env.job}/main/0/terminal/"
    r = anon.get(page)
    assert r.status_code == 302 and "/login" in r.headers["Location"]
    assert anon.get("pai/static/terminal/terminal.js").status_code in (302, 403)
    http = env.jupyter.http()
    assert http.get(f"pai/jobs/{env.bobs}/main/0/terminal/").status_code == 404  # bob's job: as if missing
    assert http.get(f"pai/jobs/{env.job}/main/7/terminal/").status_code == 404  # no such task
    assert http.get(f"pai/jobs/{env.job}/nosuchrole/0/terminal/").status_code == 404
    assert http.get("pai/static/terminal/../../terminal_page.py").status_code == 404
    bare = http.get(f"pai/jobs/{env.job}/main/0/terminal")
    assert bare.status_code == 302 and bare.headers["Location"].endswith(f"{PREFIX}pai/jobs/{env.job}/main/0/terminal/")
    ok = http.get(page)
    websocket = f"{PREFIX}pai/jobs/{env.job}/main/0/terminal/websocket"
    assert ok.status_code == 200 and f'"websocketPath": "{websocket}"' in ok.text
    assert http.get("pai/static/terminal/terminal.js").status_code == 200


def test_an_ended_task_says_so(env: Env, browser: Any) -> None:
    job = env.api.submit_ok(services_job("short", command="true"))
    env.api.wait(job, ("SUCCEEDED",), timeout=60)
    with opened(browser) as w:
        page = w.page
        page.goto(f"{env.jupyter.url}pai/jobs/{job}/main/0/terminal/?token={env.jupyter.token}")
        page.get_by_role("status").filter(has_text="The task is SUCCEEDED").wait_for(timeout=30_000)
