"""JupyterHub in front of the embedded cluster (docs/hub.md): a real JupyterHub and configurable-http-proxy started
by ``pai hub start`` (shared-password sign-in), a root daemon on the process runtime, users' servers as jobs run by
their own accounts, Chromium. Two people sign in, pick resources, wait in the queue and cancel, get JupyterLab with
only their own jobs, submit from a cell, stop from the Hub; a person removed from the Hub is offboarded; Hub tokens
act only as their own user (the attacks of docs/security.md); a restarted Hub finds its running servers, and ends
the jobs of starts it lost when killed; a server outlives a daemon restarted on another port; GPU-idle release ends a
server whose GPU is idle (the daemon's two GPUs are fake: a sampler the test steers, as tests/integration/
test_gpu_idle.py's); a named server's refused form shows its problems."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from pai_jupyter.cluster import control
from pai_jupyter.common.localserver import free_port
from tests.helpers.browser import opened
from tests.helpers.daemon import Api, home_accounts, start_daemon, v1
from tests.helpers.gpu import FAKE, Fake
from tests.helpers.hub import (
    a_cells_job_and_pai_jobs,
    bobs_lab_has_only_his_own,
    hub_home,
    hub_log_on_failure,  # noqa: F401  (fixtures: the tests ask for them by name)
    jobs_of,
    lab_page_of,
    row_names,
    server_job,
    sign_in,
    start_from_form,
)
from tests.helpers.servers import HubServer, servers
from tests.polling import wait_for

pytestmark = [pytest.mark.slow]
SERVER_SCOPES = ["users:activity!user", "access:services!service=pai"]  # a server's token's, less its own server


DAEMON = {"cpus": 4, "memory_mb": 8192, "gpus": 2}
GPU_IDLE = {
    "afterMinutes": 0.05,
    "warnMinutes": 0.03,
    "underPercent": 5,
    "everySeconds": 1,
    "sampler": "fake_gpus:sample",
}


@pytest.fixture(scope="module")
def hubbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, HubServer]]:
    """A root daemon of 4 CPUs and 2 fake GPUs (GPU-idle release on: idle 3 s, by a sampler that says 90% busy
    until ``gpus`` says otherwise) and JupyterHub in front of it."""
    tmp = tmp_path_factory.mktemp("hub")
    (tmp / "fakes").mkdir()
    (tmp / "fakes" / "fake_gpus.py").write_text(FAKE)
    Fake(tmp / "gpus.json").set(g0=90, g1=90)
    (tmp / "home" / "local").mkdir(parents=True)
    (tmp / "home" / "local" / "cluster.yaml").write_text(yaml.safe_dump({"gpuIdle": GPU_IDLE}))
    with pytest.MonkeyPatch.context() as env, servers(tmp) as s:
        env.setenv("PYTHONPATH", os.pathsep.join([str(tmp / "fakes"), os.environ.get("PYTHONPATH", "")]))
        env.setenv("PAI_TEST_FAKE_GPUS", str(tmp / "gpus.json"))
        admin = s.daemon(**DAEMON)
        yield admin, s.hub()


@pytest.fixture
def gpus(hubbed: tuple[Api, HubServer]) -> Iterator[Fake]:
    """The fake GPUs' utilisation, busy again after the test."""
    fake = Fake(Path(hubbed[0].home).parent / "gpus.json")
    yield fake
    fake.set(g0=90, g1=90)


def hub_user(hub: HubServer, admin_token: str, name: str, scopes: list[str] | None = None) -> str:
    """A Hub user ``name`` (made through the Hub's API) and a new token of theirs with ``scopes`` (default: a
    server token's, which PAISpawner asks for)."""
    api = hub.api(admin_token)
    r = api.post(f"/users/{name}")
    assert r.status_code in (201, 409), r.text
    r = api.post(f"/users/{name}/tokens", json={"scopes": scopes if scopes is not None else SERVER_SCOPES})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def test_two_people_wait_in_the_queue_cancel_and_get_only_their_own_lab(
    hubbed: tuple[Api, HubServer], browser: Any
) -> None:
    admin, hub = hubbed
    held = json.loads(v1("holder", "sleep 600", taskNumber=2, cpuNumber=2))  # all 4 CPUs, for 30 minutes at most
    holder = admin.submit_ok(json.dumps({**held, "extras": {"maxRunTimeMinutes": 30}}))
    admin.wait(holder, {"RUNNING"})
    with opened(browser, "hub-alice", viewport=(1400, 900)) as alice:
        page = alice.page
        sign_in(page, hub, "alice")
        start_from_form(page, hub, memory="50")  # refused beside its field, the value kept
        memory = page.locator(".pai-field[data-field=memory]")
        memory.locator(".pai-error", has_text="50 is below the minimum 100").wait_for(timeout=30_000)
        assert page.input_value("#pai-memory") == "50"
        start_from_form(page, hub, again=True)
        progress = page.locator("#progress-message")
        progress.filter(has_text="Waiting in the queue: first in line").wait_for(timeout=90_000)
        text = progress.inner_text()
        assert "needs 1 CPU, 0 free" in text and re.search(r"starts by \d\d:\d\d:\d\d UTC at the latest", text), text
        waiting = server_job(admin, "alice", "WAITING")
        page.wait_for_function("window._jupyterhub_page_loaded === true")
        page.click("#stop-server-btn")  # Cancel while pending
        assert admin.wait(waiting, {"STOPPED", "FAILED", "SUCCEEDED"})["jobStatus"]["state"] == "STOPPED"
        admin.stop(holder)
        admin.wait(holder)
        hub_admin = hub.api(hub.token(hub.admin))
        wait_for(lambda: not hub_admin.get("/users/alice").json()["servers"], 60, "the Hub to see the cancel through")

        start_from_form(page, hub)
        panel = lab_page_of(page, hub, "alice")
        mine = server_job(admin, "alice", "RUNNING")
        assert admin.detail(mine)["jobStatus"]["username"] == "alice"
        panel.locator(".pai-JobRow-name", has_text=mine.split("~")[1]).wait_for(timeout=60_000)
        assert "holder" not in row_names(panel)

        a_cells_job_and_pai_jobs(page, hub, admin, "alice", mine)

        with opened(browser, "hub-bob", viewport=(1400, 900)) as bob:
            sign_in(bob.page, hub, "bob")
            bob.page.goto(hub.url + "hub/spawn")
            bob.page.locator("#spawn_form button[type=submit]").click()  # the defaults
            bobs_lab_has_only_his_own(bob.page, hub, admin, mine)

        home = hub_home(browser, page, hub)
        home.click("#stop")  # the Hub stops her server: its job ends
        assert admin.wait(mine)["jobStatus"]["state"] == "STOPPED"
        home.context.close()

    # the Hub deletes her (its spawner tells the cluster once she is gone): she is offboarded
    r = hub.api(hub.token(hub.admin)).delete("/users/alice")
    assert r.status_code == 204, r.text
    gone = wait_for(lambda: admin.http.get("/api/v2/users/alice").status_code == 400 or None, 90, "alice offboarded")
    assert gone
    wait_for(lambda: _no_account(admin, "alice"), 60, "alice's OS account removed")


def _no_account(admin: Api, user: str) -> bool:
    """The daemon made no OS account for ``user`` (or removed it)."""
    return home_accounts(admin.home).find(user) is None


def test_a_hub_token_acts_only_as_its_own_user(hubbed: tuple[Api, HubServer]) -> None:
    admin, hub = hubbed
    admin_token = hub.token(hub.admin)
    victim = admin.as_user(hub_user(hub, admin_token, "victim"))
    mallory = admin.as_user(hub_user(hub, admin_token, "mallory"))
    secret = victim.submit_ok(v1("secret", "sleep 600"))
    victim.wait(secret, {"RUNNING"})
    # one user's server token against another user's job and the admin's routes
    assert mallory.http.get(f"/api/v2/jobs/{secret}").status_code == 404
    assert mallory.stop(secret).status_code == 404
    assert mallory.http.get(f"/api/v2/jobs/{secret}/config").status_code == 404
    assert all(j["username"] == "mallory" for j in mallory.http.get("/api/v2/jobs?username=victim").json())
    assert mallory.http.delete("/api/v2/local/users/victim").status_code == 403
    assert mallory.http.post("/api/v2/local/users", json={"name": "x", "admin": True}).status_code == 403
    basic = httpx.BasicAuth("victim", mallory.token)
    assert httpx.get(f"{admin.url}/api/v2/jobs/{secret}", auth=basic).status_code == 401
    # a Hub token without the service's access scope, the service's own token, a made-up one
    unscoped = admin.as_user(hub_user(hub, admin_token, "mallory", ["users:activity!user"]))
    r = unscoped.http.get("/api/v2/jobs")
    assert r.status_code == 403 and "access:services!service=pai" in r.json()["message"], r.text
    service = (hub.folder / "service-token").read_text().strip()
    r = admin.as_user(service).http.get("/api/v2/jobs")
    assert r.status_code == 403 and "service" in r.json()["message"], r.text
    assert admin.as_user("not-a-token-anyone-issued").http.get("/api/v2/jobs").status_code == 401
    # the service token announces the removal of a user the Hub still has: nothing happens
    r = httpx.delete(f"{admin.url}/api/v2/local/hub/users/victim", headers={"Authorization": f"token {service}"})
    assert r.status_code == 409, r.text
    assert victim.detail(secret)["jobStatus"]["state"] == "RUNNING"
    assert victim.http.get("/api/v2/jobs").status_code == 200
    # the cluster's owner is never a Hub user; the Hub's admin is the cluster's
    r = admin.as_user(hub_user(hub, admin_token, "root")).http.get("/api/v2/jobs")
    assert r.status_code == 403 and "owns this cluster" in r.json()["message"], r.text
    boss = admin.as_user(admin_token)
    assert boss.http.get(f"/api/v2/jobs/{secret}").status_code == 200
    assert admin.http.get(f"/api/v2/users/{hub.admin}").json()["admin"] is True
    assert victim.stop(secret).status_code == 202
    logged = (Path(admin.home) / "local" / "daemon.log").read_text(errors="replace")
    assert not [t for t in (admin_token, victim.token, mallory.token, service) if t in logged]


def test_a_user_the_hub_deleted_is_offboarded_by_the_reconcile(hubbed: tuple[Api, HubServer]) -> None:
    admin, hub = hubbed
    admin_token = hub.token(hub.admin)
    carol = admin.as_user(hub_user(hub, admin_token, "carol"))
    job = carol.submit_ok(v1("long", "sleep 600"))
    carol.wait(job, {"RUNNING"})
    assert not _no_account(admin, "carol")
    link = Path(admin.home) / "local" / "hub.yaml"
    saved = link.read_text()
    link.write_text(yaml.safe_dump({**yaml.safe_load(saved), "reconcileSeconds": 1}))  # (default 300)
    try:
        assert hub.api(admin_token).delete("/users/carol").status_code == 204  # no server: no spawner tells
        stopped = admin.wait(job, timeout=90)
    finally:
        link.write_text(saved)
    assert stopped["jobStatus"]["state"] == "STOPPED"
    assert "user carol was removed by the JupyterHub" in str(stopped["jobStatus"]["appExitDiagnostics"])
    wait_for(lambda: _no_account(admin, "carol"), 60, "carol's OS account removed")
    assert admin.http.get("/api/v2/users/carol").status_code == 400


def test_a_restarted_hub_finds_its_running_servers(hubbed: tuple[Api, HubServer]) -> None:
    admin, hub = hubbed
    api = hub.api(hub.token(hub.admin))
    hub_user(hub, hub.token(hub.admin), "dave")
    r = api.post("/users/dave/server", json={"cpu": 1, "memoryMB": 1024})
    assert r.status_code in (201, 202), r.text
    before = wait_for(lambda: ready_server(api, "dave"), 240, "dave's server ready")
    job = server_job(admin, "dave", "RUNNING")
    hub.stop()
    assert hub.pai("status").returncode != 0  # (stopped)
    hub.start()
    status = hub.pai("status")
    assert status.returncode == 0 and "JupyterHub: running" in status.stdout, status.stdout + status.stderr
    api = hub.api(hub.token(hub.admin))
    after = wait_for(lambda: ready_server(api, "dave"), 60, "dave's server found again")
    assert after["url"] == before["url"] and admin.detail(job)["jobStatus"]["state"] == "RUNNING"
    assert [j["name"] for j in jobs_of(admin, "dave")] == [job.split("~")[1]]
    dave = hub_user(hub, hub.token(hub.admin), "dave", ["access:servers!server=dave/"])
    r = httpx.get(f"{hub.url}user/dave/api/status", headers={"Authorization": f"token {dave}"}, timeout=30)
    assert r.status_code == 200, r.text
    assert api.delete("/users/dave/server").status_code in (202, 204)
    assert admin.wait(job)["jobStatus"]["state"] == "STOPPED"


def test_a_server_at_its_max_run_time_ends_and_the_hub_sees_it(hubbed: tuple[Api, HubServer]) -> None:
    admin, hub = hubbed
    api = hub.api(hub.token(hub.admin))
    hub_user(hub, hub.token(hub.admin), "erin")
    r = api.post("/users/erin/servers/short", json={"cpu": 1, "memoryMB": 1024, "maxRunTimeMinutes": 0.5})
    assert r.status_code in (201, 202), r.text  # a named server: a job of its own
    job = server_job(admin, "erin", "RUNNING")
    assert "jupyterhub-short-" in job
    ended = admin.wait(job, timeout=120)["jobStatus"]
    assert ended["state"] == "STOPPED" and "max run time" in str(ended["appExitDiagnostics"]), ended
    wait_for(lambda: not api.get("/users/erin").json()["servers"], 60, "the Hub to see erin's server ended")


def ready_server(api: httpx.Client, user: str, name: str = "") -> dict[str, Any] | None:
    """``user``'s server ``name`` as the Hub's API shows it once it is ready, else None."""
    server = (api.get(f"/users/{user}").json().get("servers") or {}).get(name)
    return server if server and server.get("ready") else None


def through_the_hub(hub: HubServer, user: str, path: str, name: str = "") -> httpx.Response:
    """GET ``path`` of ``user``'s server through the Hub's proxy, with a token of theirs for that server."""
    token = hub_user(hub, hub.token(hub.admin), user, [f"access:servers!server={user}/{name}"])
    url = f"{hub.url}user/{user}/{name + '/' if name else ''}{path}"
    return httpx.get(url, headers={"Authorization": f"token {token}"}, timeout=60)


def test_a_start_the_hub_lost_when_killed_leaves_no_job_behind_and_the_hub_starts_again(
    hubbed: tuple[Api, HubServer],
) -> None:
    admin, hub = hubbed
    api = hub.api(hub.token(hub.admin))
    holder = admin.submit_ok(v1("holder-lost", "sleep 600", taskNumber=2, cpuNumber=2))  # all 4 CPUs
    admin.wait(holder, {"RUNNING"})
    for user, cpus in (("frank", 1), ("grace", 4)):
        hub_user(hub, hub.token(hub.admin), user)
        r = api.post(f"/users/{user}/server", json={"cpu": cpus, "memoryMB": 1024})
        assert r.status_code in (201, 202), r.text
    franks, graces = server_job(admin, "frank", "WAITING"), server_job(admin, "grace", "WAITING")
    os.kill(int((hub.folder / "hub.pid").read_text()), signal.SIGKILL)  # the Hub dies while both starts wait
    try:
        admin.stop(holder)
        admin.wait(holder)
        # frank's job runs, with no Hub to answer its server; grace's (4 CPUs, frank holds 1) waits on
        server_job(admin, "frank", "RUNNING")
        assert admin.detail(graces)["jobStatus"]["state"] == "WAITING"
    finally:
        hub.start()  # (the proxy of the killed Hub still runs: the new Hub must use it)
    api = hub.api(hub.token(hub.admin))
    # nobody waits for either start any more: the restarted Hub ends both jobs (they were in its database)
    assert admin.wait(graces, timeout=240)["jobStatus"]["state"] == "STOPPED"
    assert admin.wait(franks, timeout=240)["jobStatus"]["state"] in ("STOPPED", "FAILED")
    for user in ("frank", "grace"):
        wait_for(lambda u=user: not api.get(f"/users/{u}").json()["servers"], 120, f"the Hub to drop {user}'s start")
    r = api.post("/users/frank/server", json={"cpu": 1, "memoryMB": 1024})  # and starts servers again
    assert r.status_code in (201, 202), r.text
    wait_for(lambda: ready_server(api, "frank"), 240, "frank's server ready")
    assert through_the_hub(hub, "frank", "api/status").status_code == 200
    assert api.delete("/users/frank/server").status_code in (202, 204)


def test_a_server_whose_gpu_idles_is_released_and_the_hub_sees_it_end(
    hubbed: tuple[Api, HubServer], gpus: Fake
) -> None:
    admin, hub = hubbed
    api = hub.api(hub.token(hub.admin))
    hub_user(hub, hub.token(hub.admin), "heidi")
    r = api.post("/users/heidi/server", json={"cpu": 1, "memoryMB": 1024, "gpu": 1})
    assert r.status_code in (201, 202), r.text
    wait_for(lambda: ready_server(api, "heidi"), 240, "heidi's server ready")
    job = server_job(admin, "heidi", "RUNNING")
    assert admin.detail(job)["taskRoles"]["server"]["taskStatuses"][0]["containerGpus"]  # (it holds one)
    gpus.set(g0=1, g1=1)  # idle: released after 3 s
    ended = admin.wait(job, timeout=120)["jobStatus"]
    assert ended["state"] == "STOPPED" and "GPUs stayed under 5% utilisation" in str(ended["appExitDiagnostics"])
    wait_for(lambda: not api.get("/users/heidi").json()["servers"], 60, "the Hub to see heidi's server ended")


def test_a_named_servers_refused_form_shows_its_problems_and_starts_that_server(
    hubbed: tuple[Api, HubServer], browser: Any
) -> None:
    admin, hub = hubbed
    with opened(browser, "hub-ivy", viewport=(1400, 900)) as ivy:
        page = ivy.page
        sign_in(page, hub, "ivy")
        page.goto(hub.url + "hub/spawn/ivy/notes")
        page.fill("#pai-memory", "50")
        page.fill("#pai-cpu", "1")
        page.locator("#spawn_form button[type=submit]").click()
        memory = page.locator(".pai-field[data-field=memory]")
        memory.locator(".pai-error", has_text="50 is below the minimum 100").wait_for(timeout=30_000)
        assert page.input_value("#pai-memory") == "50" and urlsplit(page.url).path == "/hub/spawn/ivy/notes"
        page.fill("#pai-memory", "1024")
        page.locator("#spawn_form button[type=submit]").click()
        page.wait_for_url(re.compile(r".*/user/ivy/notes/lab.*"), timeout=240_000)
    job = server_job(admin, "ivy", "RUNNING")
    assert "jupyterhub-notes-" in job and admin.detail(job)["taskRoles"]["server"]["taskStatuses"]
    api = hub.api(hub.token(hub.admin))
    assert api.delete("/users/ivy/servers/notes").status_code in (202, 204)
    admin.wait(job)


def test_a_server_keeps_the_cluster_when_the_daemon_restarts_on_another_port(hubbed: tuple[Api, HubServer]) -> None:
    admin, hub = hubbed
    api = hub.api(hub.token(hub.admin))
    hub_user(hub, hub.token(hub.admin), "judy")
    r = api.post("/users/judy/server", json={"cpu": 1, "memoryMB": 1024})
    assert r.status_code in (201, 202), r.text
    wait_for(lambda: ready_server(api, "judy"), 240, "judy's server ready")
    job = server_job(admin, "judy", "RUNNING")
    before = through_the_hub(hub, "judy", "pai/api/jobs")
    assert before.status_code == 200 and job in {f"{j['username']}~{j['name']}" for j in before.json()["jobs"]}
    old = admin.url
    control.stop(admin.home)  # its tasks keep running, re-attached at the next start
    again = start_daemon(Path(admin.home), port=free_port(), **DAEMON)
    admin.__init__(again.url, again.token, again.home, again.socket)  # type: ignore[misc]  # (the module's caller)
    assert admin.url != old and admin.detail(job)["jobStatus"]["state"] == "RUNNING"
    after = through_the_hub(hub, "judy", "pai/api/jobs")  # the sidebar's list, as judy's server asks the cluster
    assert after.status_code == 200, after.text
    assert after.json()["user"] == "judy" and job in {f"{j['username']}~{j['name']}" for j in after.json()["jobs"]}
    assert api.delete("/users/judy/server").status_code in (202, 204)
    assert admin.wait(job)["jobStatus"]["state"] == "STOPPED"
