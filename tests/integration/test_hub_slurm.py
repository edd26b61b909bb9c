"""JupyterHub in front of the Slurm backend (docs/hub.md): ``pai hub start --backend slurm`` before a root daemon on
the real two-node test cluster (tests/slurm/), Chromium as two people. Each person's server is a Slurm job on a
node, another host (a network namespace on the cluster's bridge), which reaches the Hub's API and the cluster's
REST at this host's address on that bridge with nothing configured for it; the proxy reaches the server at its
node's address. While a gang job holds every CPU the spawn page shows the place in Slurm's line, Slurm's reason
and Slurm's expected start (``squeue --start``); Stop cancels the pending job. Then JupyterLab served from the
node, the PAI sidebar with only that person's jobs, a job submitted from a cell, Stop from the Hub; the other
person sees none of it. The daemon and the Hub listen on loopback and the nodes' network only; the owner's token
is refused there."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.helpers.browser import opened
from tests.helpers.daemon import Api, v1
from tests.helpers.hub import (
    a_cells_job_and_pai_jobs,
    bobs_lab_has_only_his_own,
    hub_home,
    hub_log_on_failure,  # noqa: F401  (fixtures, asked for by name)
    jobs_of,
    lab_page_of,
    row_names,
    server_job,
    sign_in,
    start_from_form,
)
from tests.helpers.servers import HubServer, servers
from tests.polling import wait_for

from ..slurm.fixture import node_addrs

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def hubbed(slurm_cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, HubServer]]:
    """A root daemon on the Slurm runtime (2 nodes of 2 CPUs) and ``pai hub start --backend slurm`` before it."""
    with servers(tmp_path_factory.mktemp("hub-slurm")) as s:
        admin = s.daemon(runtime="slurm")
        yield admin, s.hub(backend="slurm")


def runtime_info(admin: Api) -> dict[str, Any]:
    return dict(json.loads((Path(admin.home) / "local" / "runtime.json").read_text()))


def the_server_task(admin: Api, job: str) -> dict[str, Any]:
    detail = admin.detail(job)
    return dict(detail["taskRoles"]["server"]["taskStatuses"][0])


def test_two_people_wait_in_slurms_queue_cancel_and_get_their_own_lab_on_a_node(
    hubbed: tuple[Api, HubServer], browser: Any
) -> None:
    admin, hub = hubbed
    nodes = set(node_addrs().values())
    held = json.loads(v1("holder", "sleep 600", taskNumber=2, cpuNumber=2))  # both nodes' CPUs, 30 min at most
    holder = admin.submit_ok(json.dumps({**held, "extras": {"maxRunTimeMinutes": 30}}))
    admin.wait(holder, {"RUNNING"})
    with opened(browser, "hub-slurm-alice", viewport=(1400, 900)) as alice:
        page = alice.page
        sign_in(page, hub, "alice")
        start_from_form(page, hub)
        progress = page.locator("#progress-message")
        progress.filter(has_text="Slurm expects it to start at").wait_for(timeout=120_000)
        text = progress.inner_text()
        assert text.startswith("Waiting in Slurm's queue: first in line"), text
        assert "pending in Slurm as job" in text and re.search(r"start at \d\d:\d\d:\d\d UTC \(in 2\dm", text), text
        waiting = server_job(admin, "alice", "WAITING")
        page.wait_for_function("window._jupyterhub_page_loaded === true")
        page.click("#stop-server-btn")  # Cancel while pending: the job and its Slurm job end
        assert admin.wait(waiting, {"STOPPED", "FAILED", "SUCCEEDED"})["jobStatus"]["state"] == "STOPPED"
        admin.stop(holder)
        admin.wait(holder)
        hub_admin = hub.api(hub.token(hub.admin))
        wait_for(lambda: not hub_admin.get("/users/alice").json()["servers"], 60, "the Hub to see the cancel through")

        start_from_form(page, hub)
        panel = lab_page_of(page, hub, "alice")
        mine = server_job(admin, "alice", "RUNNING")
        task = the_server_task(admin, mine)
        assert task["containerIp"] in nodes and task["containerNodeName"] in node_addrs(), task  # served from a node
        panel.locator(".pai-JobRow-name", has_text=mine.split("~")[1]).wait_for(timeout=60_000)
        assert "holder" not in row_names(panel)

        a_cells_job_and_pai_jobs(page, hub, admin, "alice", mine)

        with opened(browser, "hub-slurm-bob", viewport=(1400, 900)) as bob:
            sign_in(bob.page, hub, "bob")
            start_from_form(bob.page, hub)
            bobs_lab_has_only_his_own(bob.page, hub, admin, mine)

        home_page = hub_home(browser, page, hub)
        home_page.click("#stop")  # the Hub stops her server: its job (and its Slurm job) ends
        assert admin.wait(mine)["jobStatus"]["state"] == "STOPPED"
        home_page.context.close()
    assert [j["state"] for j in jobs_of(admin, "alice") if j["name"] == mine.split("~")[1]] == ["STOPPED"]


def listening(pid: int) -> set[str]:
    """The addresses a process listens on over TCP."""
    return {c.laddr.ip for c in psutil.Process(pid).net_connections("tcp") if c.status == psutil.CONN_LISTEN}


def test_the_daemon_and_the_hub_listen_on_loopback_and_the_nodes_network_only(hubbed: tuple[Api, HubServer]) -> None:
    admin, hub = hubbed
    info = runtime_info(admin)
    bridge = str(info["nodesUrl"]).split("//")[1].rsplit(":", 1)[0]  # this host's address towards the nodes
    assert bridge.startswith("10.203.") and bridge.endswith(".1"), info
    assert listening(int(info["pid"])) == {"127.0.0.1", bridge}  # (never 0.0.0.0: not every interface)
    hub_pid = int((hub.folder / "hub.pid").read_text())
    assert listening(hub_pid) == {bridge}  # the Hub's own port, where servers on the nodes call its API
    assert "c.JupyterHub.hub_ip = " + repr(bridge) in (hub.folder / "jupyterhub_config.py").read_text()
    # the cluster owner's token, presented where the nodes reach the daemon (a task there that somehow holds it)
    owner = httpx.get(f"{info['nodesUrl']}/api/v2/jobs", headers={"Authorization": f"Bearer {admin.token}"}, timeout=30)
    assert owner.status_code == 403 and "this machine only" in owner.text, owner.text
    assert admin.http.get("/api/v2/jobs").status_code == 200  # (the owner's own clients: the socket, loopback)
