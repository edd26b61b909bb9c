"""The client against the real daemon: submit, list, detail, logs, follow, stop, clone, wait, auto-start."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pai_jupyter import Job, TaskRole
from pai_jupyter.client import AsyncClient, Client, InvalidJob, JobConflict, JobNotFound, WaitTimeout
from pai_jupyter.client.locality import REMOTE
from pai_jupyter.cluster import control
from tests.helpers.daemon import Api, v1


def test_first_use_starts_the_local_daemon(pai_home: Path) -> None:
    assert control.running(pai_home) is None
    try:
        with Client() as pai:
            assert pai.list_jobs() == []
            info = control.running(pai_home)
            assert info is not None and pai.info().local is not None
    finally:
        control.stop(pai_home)


def test_submit_wait_logs_and_list(daemon: Api) -> None:
    with Client() as pai:
        job = Job(name="sdk", image="busybox", task_roles=[TaskRole(name="main", command="echo hi from sdk")])
        job_id = pai.submit(job)
        assert job_id.endswith("~sdk")
        d = pai.wait(job_id, timeout=30)
        assert d.state == "SUCCEEDED" and d.exit_code == 0
        assert "hi from sdk" in pai.logs("sdk", stream="stdout")
        assert pai.logs("sdk", stream="stdout", tail=True).endswith("hi from sdk\n")
        rows = pai.list_jobs()
        assert [r.id for r in rows] == [job_id]
        assert list(rows.to_frame()["state"]) == ["SUCCEEDED"]
        assert pai.config(job_id).startswith("protocolVersion: 2")
        with pytest.raises(JobConflict):
            pai.submit(job)
        with pytest.raises(JobNotFound):
            pai.detail("nope")
        with pytest.raises(InvalidJob):
            pai.submit(v1("bad", "true", memoryMB=10))


def test_list_pages_through_offset_and_limit(daemon: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from pai_jupyter.client import calls

    monkeypatch.setattr(calls, "PAGE", 3)
    for i in range(7):
        daemon.submit_ok(v1(f"p{i}", "true"))
    with Client() as pai:
        assert len(pai.list_jobs()) == 7
        assert [j.name for j in pai.list_jobs(limit=5, order="jobName,ASC")] == [f"p{i}" for i in range(5)]


def test_follow_streams_lines_as_they_come_and_ends(daemon: Api) -> None:
    with Client() as pai:
        job_id = pai.submit(v1("follow", "for i in 1 2 3; do echo line $i; sleep 0.2; done"))
        text = "".join(pai.follow(job_id, stream="stdout"))
        assert [x for x in text.splitlines() if x.startswith("line")] == ["line 1", "line 2", "line 3"]


def test_follow_by_polling_the_tail_repeats_no_line(daemon: Api) -> None:
    with Client() as pai:
        pai._server = REMOTE  # behave as against a real OpenPAI: no live stream
        job_id = pai.submit(v1("poll", "for i in $(seq 1 30); do echo n$i; sleep 0.05; done"))
        text = "".join(pai.follow(job_id, stream="stdout", poll=0.1))
        assert [x for x in text.splitlines() if x.startswith("n")] == [f"n{i}" for i in range(1, 31)]


def test_stop_and_wait_with_timeout(daemon: Api) -> None:
    with Client() as pai:
        job_id = pai.submit(v1("long", "sleep 60"))
        with pytest.raises(WaitTimeout):
            pai.wait(job_id, timeout=0.3)
        pai.wait(job_id, until={"RUNNING"})
        pai.stop(job_id)
        assert pai.wait(job_id, timeout=10).state == "STOPPED"


def test_clone_keeps_the_exact_config_and_secrets(daemon: Api) -> None:
    text = (
        "protocolVersion: 2\nname: secretive   # a comment kept verbatim\ntype: job\n"
        "secrets: {token: abc123}\nprerequisites: [{name: i, type: dockerimage, uri: busybox}]\n"
        "taskRoles:\n  main:\n    dockerImage: i\n    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}\n"
        "    commands: ['echo token=<% $secrets.token %>']\n"
    )
    with Client() as pai:
        first = pai.submit(text)
        pai.wait(first)
        copy = pai.clone(first)
        assert copy.split("~")[1].startswith("secretive_")
        pai.wait(copy)
        assert "token=abc123" in pai.logs(copy, stream="stdout")
        assert "******" in pai.config(copy) and "abc123" not in pai.config(copy)
        named = pai.clone(first, name="again")
        assert named.endswith("~again")


def test_async_client_does_the_same(daemon: Api) -> None:
    async def run() -> tuple[str, str, str]:
        async with AsyncClient() as pai:
            job_id = await pai.submit(v1("async", "echo async hello"))
            d = await pai.wait(job_id, timeout=30)
            chunks = [c async for c in pai.follow(job_id, stream="stdout")]
            return d.state, await pai.logs(job_id, stream="stdout"), "".join(chunks)

    state, log, followed = asyncio.run(run())
    assert state == "SUCCEEDED" and "async hello" in log and "async hello" in followed


def test_bare_names_mean_the_profile_user_and_ids_are_accepted(daemon: Api) -> None:
    with Client() as pai:
        job_id = pai.submit(v1("ids", "true"))
        assert pai.detail("ids").id == pai.detail(job_id).id == job_id
        assert pai.attempts(job_id)[0].is_latest is True
        assert json.loads(pai.attempts(job_id)[0].model_dump_json(by_alias=True))["isLatest"] is True  # (extras too)
        assert pai.events(job_id)[0].reason == "Submitted"
