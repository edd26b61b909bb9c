"""The sidebar's job list (``server/jobs.py``) against a real daemon: one poll is one daemon request (the local
``/api/v2/local/jobs``), where the per-job path (what a remote OpenPAI server gets) makes 1 + 2N, and both give the
Lab the same answer: each live job's tasks in the detail's order, their states and services. In Chromium, the
sidebar of a cluster stopped under it says how to start it again, and keeps no rows of what it no longer knows."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.client import AsyncClient, Client
from pai_jupyter.cluster import control
from pai_jupyter.server.jobs import job_row, listed_jobs, listed_per_job
from tests.helpers.browser import opened, pai_sidebar
from tests.helpers.daemon import Api, v1
from tests.helpers.jupyter_fixture import services_job, services_up
from tests.helpers.servers import servers
from tests.helpers.transport import Counting

BASE = "/user/ada/"
LOG = logging.getLogger("test")


def _two_roles(name: str) -> str:
    role = {"taskNumber": 2, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": "sleep 300"}
    roles = [{"name": "worker", **role}, {"name": "ps", **role, "taskNumber": 1}]
    return json.dumps({"jobName": name, "image": "pai-test/busybox:latest", "taskRoles": roles})


def test_one_poll_is_one_daemon_request_and_answers_as_the_per_job_path(daemon: Api, pai_home: Path) -> None:
    done = daemon.submit_ok(v1("list-done", "true"))
    daemon.wait(done)
    gang = daemon.submit_ok(_two_roles("list-gang"))
    boards = daemon.submit_ok(services_job("list-boards", tensorboard="tb", jupyter=True))
    waiting = daemon.submit_ok(v1("list-waiting", "true", cpuNumber=8))  # 8 CPUs, 4 taken: it waits
    for job in (gang, boards):
        daemon.wait(job, {"RUNNING"}, timeout=60)
    with Client("local", home=pai_home) as pai:
        services_up(pai, boards, ("tensorboard", "jupyter"))

    async def poll() -> tuple[list[str], list[str], list[dict], list[dict]]:
        one, per_job = Counting(), Counting()
        async with (
            AsyncClient("local", home=pai_home, transport=one) as a,
            AsyncClient("local", home=pai_home, transport=per_job) as b,
        ):
            new = await listed_jobs(a, 200, None, LOG)
            old = await listed_per_job(b, 200, None, LOG)
        return one.paths, per_job.paths, [job_row(BASE, *r) for r in new], [job_row(BASE, *r) for r in old]

    one, per_job, new, old = asyncio.run(poll())
    assert one == ["/api/v2/local/jobs"]
    assert len(per_job) == 1 + 2 * 3  # the list, then a detail and the services of each of the 3 live jobs
    assert new == old
    rows = {r["id"]: r for r in new}
    assert list(rows) == [waiting, boards, gang, done]  # newest first
    assert [(t["role"], t["index"], t["state"]) for t in rows[gang]["tasks"]] == [
        ("worker", 0, "RUNNING"),
        ("worker", 1, "RUNNING"),
        ("ps", 0, "RUNNING"),
    ]
    (task,) = rows[boards]["tasks"]
    assert {s["name"]: s["state"] for s in task["services"]} == {"tensorboard": "running", "jupyter": "running"}
    assert task["terminalUrl"] == f"{BASE}pai/jobs/{boards}/main/0/terminal/websocket"
    assert [t["state"] for t in rows[waiting]["tasks"]] == ["WAITING"] and rows[done]["tasks"] == []


@pytest.mark.slow
@pytest.mark.browser
def test_the_sidebar_of_a_stopped_cluster_says_how_to_start_it_and_drops_its_rows(
    tmp_path: Path, browser: Any, request: pytest.FixtureRequest
) -> None:
    with servers(tmp_path) as s:
        s.daemon().submit_ok(v1("before-the-stop", "sleep 300"))
        jupyter = s.jupyter(lab=True, lab_settings={"refreshSeconds": 1})
        with opened(browser, shot=request.node.name) as w:
            panel = pai_sidebar(w.page, jupyter, "stopped-cluster")
            rows = panel.locator(".pai-JobRow")
            rows.filter(has_text="before-the-stop").wait_for(timeout=60_000)
            control.remember_stop(s.home)  # `pai cluster stop`
            control.stop(s.home)
            status = panel.locator(".pai-JobsPanel-status")
            status.filter(has_text="start it again with: pai cluster start").wait_for(timeout=60_000)
            assert "it was stopped with `pai cluster stop`" in status.inner_text()
            assert rows.count() == 0  # not the RUNNING job it showed before
            assert not w.dialogs, w.dialogs
