"""The Hub's page tests' shared steps: sign in, start a server from the form, a user's Lab page and the Hub's home
page, their server's job, what a cell's job and another user's Lab show; and ``hub_log_on_failure``, an autouse
fixture a module imports: the Hub's and the daemon's logs beside a failed test's screenshot (it asks for the
module's own ``hubbed`` fixture)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import SHOTS, notebook_at, run_all_cells, sidebar_at
from tests.helpers.daemon import Api, account_of, v1
from tests.helpers.jupyter_fixture import write_notebook
from tests.helpers.servers import HubServer
from tests.polling import wait_for


def jobs_of(admin: Api, user: str) -> list[dict[str, Any]]:
    r = admin.http.get("/api/v2/jobs", params={"username": user})
    assert r.status_code == 200, r.text
    return [j for j in r.json() if j["username"] == user]


def server_job(admin: Api, user: str, state: str) -> str:
    """The id of ``user``'s Hub server job in ``state`` (waited for)."""

    def found() -> str | None:
        named = [j for j in jobs_of(admin, user) if j["name"].startswith("jupyterhub-") and j["state"] == state]
        return f"{user}~{named[0]['name']}" if named else None

    return wait_for(found, 180, lambda: f"{user}'s server job {state}: {jobs_of(admin, user)}")


def a_cells_job_and_pai_jobs(page: Any, hub: HubServer, admin: Api, user: str, server: str) -> None:
    """In ``user``'s Lab: a notebook whose cells submit a job (``%%pai_submit --wait``) and run ``pai jobs``, as
    them; the job succeeds, and ``pai jobs`` lists their server's job and not the holder's (another user's)."""
    home = Path(admin.home) / "local" / "users" / user / "home"  # their server's HOME (their account's)
    cells = ["%load_ext pai_jupyter", "%%pai_submit --wait\n" + v1("from-a-cell", "echo hi-hub"), "!pai jobs"]
    notebook = write_notebook(home / "submit.ipynb", *cells)
    account = account_of(admin.home, user)
    os.chown(notebook, account.pw_uid, account.pw_gid)
    notebook_at(page, f"{hub.url}user/{user}/lab/tree/submit.ipynb", 120_000)
    run_all_cells(page)
    outputs = page.locator(".jp-OutputArea-output")
    job = f"{user}~from-a-cell"
    wait_for(
        lambda: admin.http.get(f"/api/v2/jobs/{job}").status_code == 200 or None,
        120,
        lambda: f"the cell's job (the cells said {outputs.all_inner_texts()})",
    )
    done = admin.wait(job, timeout=120)
    assert done["jobStatus"]["state"] == "SUCCEEDED" and "hi-hub" in admin.log(job)
    listed = outputs.filter(has_text=server).filter(has_text="from-a-cell")  # `pai jobs` (not the cell's own line)
    listed.first.wait_for(timeout=60_000)
    assert "holder" not in listed.first.inner_text()


def bobs_lab_has_only_his_own(page: Any, hub: HubServer, admin: Api, hers: str) -> None:
    """Bob's Lab (his server just started) lists his server's job and none of alice's (``hers``, her cell's job),
    in the sidebar and in its server's answer; then the Hub stops his server."""
    bobs = lab_page_of(page, hub, "bob")
    his = server_job(admin, "bob", "RUNNING")
    bobs.locator(".pai-JobRow-name", has_text=his.split("~")[1]).wait_for(timeout=60_000)
    assert not {"from-a-cell", hers.split("~")[1]} & set(row_names(bobs)), row_names(bobs)
    answer = page.request.get(f"{hub.url}user/bob/pai/api/jobs").json()
    assert answer["user"] == "bob" and {j["username"] for j in answer["jobs"]} == {"bob"}, answer
    assert hub.api(hub.token(hub.admin)).delete("/users/bob/server").status_code in (202, 204)
    admin.wait(his)


def sign_in(page: Any, hub: HubServer, name: str) -> None:
    page.goto(hub.url + "hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", hub.password())
    page.click("#login_submit")
    page.wait_for_url(re.compile(r".*/hub/(spawn|home).*"), timeout=60_000)


def start_from_form(page: Any, hub: HubServer, memory: str = "1024", *, again: bool = False) -> None:
    """Fill the spawn page's form and start; ``again``: on the form the Hub showed with a refusal."""
    if not again:
        page.goto(hub.url + "hub/spawn")
    page.fill("#pai-memory", memory)
    page.fill("#pai-cpu", "1")
    page.locator("#spawn_form button[type=submit]").click()


def lab_page_of(page: Any, hub: HubServer, name: str) -> Any:
    """The user's JupyterLab (their server started) with the PAI sidebar open."""
    page.wait_for_url(re.compile(f".*/user/{name}/lab.*"), timeout=240_000)
    return sidebar_at(page, f"{hub.url}user/{name}/lab/workspaces/hub-{name}?reset")


def hub_home(browser: Any, page: Any, hub: HubServer) -> Any:
    """The Hub's home page as the person signed in on ``page`` (a page of its own: their Lab's open notebook
    would ask before being left)."""
    context = browser.new_context(storage_state=page.context.storage_state())
    home = context.new_page()
    home.goto(hub.url + "hub/home")
    home.wait_for_function("window._jupyterhub_page_loaded === true", timeout=60_000)  # its buttons work
    return home


def row_names(panel: Any) -> list[str]:
    return [n.strip() for n in panel.locator(".pai-JobRow-name").all_inner_texts()]


@pytest.fixture(autouse=True)
def hub_log_on_failure(request: pytest.FixtureRequest, hubbed: tuple[Api, HubServer]) -> Iterator[None]:
    """A failed test leaves the Hub's and the proxy's logs beside its screenshot."""
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        SHOTS.mkdir(exist_ok=True)
        (SHOTS / f"{request.node.name}.hub.log").write_text(hubbed[1].log_text()[-20000:])
        log = Path(hubbed[0].home) / "local" / "daemon.log"
        if log.exists():
            shutil.copy(log, SHOTS / f"{request.node.name}.daemon.log")
