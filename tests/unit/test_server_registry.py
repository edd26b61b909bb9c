"""The server extension's registry in-process: lookup and its cache, refusals mapped to HTTP statuses, start on
demand, idle culling and terminals, against an in-memory client (the cluster's answers, no daemon, no Jupyter
server, no sleeps: idleness is made by moving the recorded use times back)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from pai_jupyter.client import JobNotFound, NotSupported, PaiError, ServerUnavailable
from pai_jupyter.client.base import LOCAL_DOWN
from pai_jupyter.server.common import PaiHTTPError, unavailable
from pai_jupyter.server.registry import Registry, Target
from tests.helpers.registry import JOB, MemoryClient, refused, run

KEY = (JOB, "main", 0, "tensorboard")
STAMP = 1767323045000  # 2026-01-02 03:04:05 UTC in ms: MemoryClient's job's submission time


class Socket:
    def __init__(self) -> None:
        self.closed: tuple[int | None, str | None] | None = None

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        self.closed = (code, reason)


def test_resolve_finds_the_declared_service_and_caches_it() -> None:
    async def body(reg: Registry, client: MemoryClient) -> None:
        key, target = await reg.resolve("alice", "train", "main", 0, "tensorboard")
        assert key == KEY and target == Target("127.0.0.1", 6006, "/tb/", None, stamp=str(STAMP))
        _, jp = await reg.resolve("alice", "train", "main", 0, "jupyter")
        assert jp.token == "t0k" and jp.port == 8890
        await reg.resolve("alice", "train", "main", 0, "tensorboard")
        assert client.services_calls() == 2  # the second tensorboard lookup came from the cache
        reg.forget(KEY)
        await reg.resolve("alice", "train", "main", 0, "tensorboard")
        assert client.services_calls() == 3

    run(body)


def test_a_target_keeps_the_stamp_of_the_job_it_was_found_in_and_the_stamp_cache_follows() -> None:
    """The job deleted and submitted again under its name while its stamp was cached: the target found again
    (its old address refused) must carry, and leave in the cache, the new job's stamp, never the old one."""

    async def body(reg: Registry, client: MemoryClient) -> None:
        assert await reg.stamp("alice", "train") == str(STAMP)
        _, target = await reg.resolve("alice", "train", "main", 0, "tensorboard")
        assert target.stamp == str(STAMP)
        client.submitted += timedelta(seconds=3)  # submitted again; its TensorBoard on another port
        client.items[JOB][0]["port"] = 7007
        assert (await reg.resolve("alice", "train", "main", 0, "tensorboard"))[1] == target  # cached, as before
        reg.forget(KEY)  # the proxy's connection to 6006 was refused
        _, again = await reg.resolve("alice", "train", "main", 0, "tensorboard")
        assert (again.port, again.stamp) == (7007, str(STAMP + 3000))
        assert await reg.stamp("alice", "train") == str(STAMP + 3000)  # not the old job's, still cached

    run(body)


def test_a_zero_cache_asks_the_cluster_every_time_and_follows_a_moved_port() -> None:
    async def body(reg: Registry, client: MemoryClient) -> None:
        await reg.resolve("alice", "train", "main", 0, "tensorboard")
        client.items[JOB][0]["port"] = 7007
        _, target = await reg.resolve("alice", "train", "main", 0, "tensorboard")
        assert target.port == 7007 and client.services_calls() == 2

    run(body, resolve_cache_seconds=0.0)


def test_other_users_jobs_and_unknown_services_are_404_without_asking_the_cluster() -> None:
    async def body(reg: Registry, client: MemoryClient) -> None:
        assert (await refused(reg.resolve("bob", "train", "main", 0, "tensorboard"))).status_code == 404
        assert (await refused(reg.resolve("alice", "train", "main", 0, "ssh"))).status_code == 404
        assert client.calls == []
        assert (await refused(reg.resolve("alice", "train", "main", 1, "tensorboard"))).status_code == 404
        assert (await refused(reg.resolve("alice", "nope", "main", 0, "tensorboard"))).status_code == 404
        assert reg.entries == {}  # nothing kept for what does not exist
        with pytest.raises(PaiHTTPError):
            reg.job_id("bob", "train")

    run(body)


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (JobNotFound("gone", status=404), 404, "NotFound"),
        (NotSupported("no services on OpenPAI", status=404), 501, "NotSupported"),
        (PaiError("boom", status=500), 502, "ClusterError"),
    ],
)
def test_the_clusters_refusals_become_statuses(error: PaiError, status: int, code: str) -> None:
    async def body(reg: Registry, client: MemoryClient) -> None:
        client.error = error
        exc = await refused(reg.resolve("alice", "train", "main", 0, "tensorboard"))
        assert (exc.status_code, exc.code) == (status, code)
        assert "boom" not in exc.message  # the cluster's own text stays in the server's log

    run(body)


def test_a_stopped_local_cluster_is_503_in_the_clients_words_and_a_clusters_5xx_stays_in_the_log() -> None:
    words = "the local cluster is not running: it was stopped with `pai cluster stop`; start it again with: ..."
    down = unavailable(ServerUnavailable(words, code=LOCAL_DOWN))
    assert (down.status_code, down.code, down.message) == (503, LOCAL_DOWN, words)
    busy = unavailable(ServerUnavailable("profile 'x' answered 503: boom", status=503))
    assert (busy.status_code, busy.code) == (502, "ClusterError") and "boom" not in busy.message


def test_a_stopped_service_is_started_again_on_demand() -> None:
    async def body(reg: Registry, client: MemoryClient) -> None:
        _, target = await reg.resolve("alice", "train", "main", 0, "tensorboard")
        assert target.port == 6006
        assert ("action", JOB, "main", 0, "tensorboard", "start") in client.calls

    run(body, MemoryClient(state="stopped"))


def test_a_service_that_stays_stopped_or_cannot_start_is_409() -> None:
    async def stays(reg: Registry, client: MemoryClient) -> None:
        client.start_makes = "stopped"
        exc = await refused(reg.resolve("alice", "train", "main", 0, "tensorboard"))
        assert (exc.status_code, exc.code) == (409, "NotRunning")

    async def refuses(reg: Registry, client: MemoryClient) -> None:
        client.action_error = PaiError("task is SUCCEEDED, not running", status=400)
        exc = await refused(reg.resolve("alice", "train", "main", 0, "jupyter"))
        assert (exc.status_code, exc.code) == (409, "NotRunning")

    run(stays, MemoryClient(state="stopped"))
    run(refuses, MemoryClient(state="stopped"))


def test_a_service_still_starting_past_the_timeout_is_503_with_retry_after() -> None:
    async def body(reg: Registry, client: MemoryClient) -> None:
        exc = await refused(reg.resolve("alice", "train", "main", 0, "tensorboard"))
        assert (exc.status_code, exc.code, exc.retry_after) == (503, "Starting", 2)
        assert client.services_calls() == 1

    run(body, MemoryClient(state="starting"), service_start_timeout=0.0)


def test_cull_once_stops_idle_services_closes_their_sockets_and_idle_terminals() -> None:
    async def body(reg: Registry, client: MemoryClient) -> None:
        await reg.resolve("alice", "train", "main", 0, "tensorboard")
        busy_key, _ = await reg.resolve("alice", "train", "main", 0, "jupyter")
        ws, term, fresh_term = Socket(), Socket(), Socket()
        reg.socket_opened(KEY, ws)
        reg.terminal_opened(term)
        reg.terminal_opened(fresh_term)
        reg.entries[KEY].last_used -= 120
        reg.terminals[term] -= 120
        assert await reg.cull_once() == [KEY]
        assert ("action", JOB, "main", 0, "tensorboard", "stop") in client.calls
        assert not any(c[0] == "action" and c[4] == "jupyter" for c in client.calls)
        assert reg.entries[KEY].target is None and reg.entries[busy_key].target is not None
        assert ws.closed is not None and ws.closed[0] == 1001
        assert term.closed is not None and fresh_term.closed is None and list(reg.terminals) == [fresh_term]
        # the next request starts it again
        _, target = await reg.resolve("alice", "train", "main", 0, "tensorboard")
        assert target.port == 6006 and client.calls[-3][-1] == "start"  # then services, then the stamp (detail)

    run(body, idle_timeout_minutes=1.0)


def test_a_cull_the_cluster_refuses_forgets_the_entry_and_zero_turns_culling_off() -> None:
    async def refused_cull(reg: Registry, client: MemoryClient) -> None:
        await reg.resolve("alice", "train", "main", 0, "tensorboard")
        reg.entries[KEY].last_used -= 120
        client.action_error = JobNotFound("gone", status=404)
        assert await reg.cull_once() == [] and KEY not in reg.entries

    async def off(reg: Registry, client: MemoryClient) -> None:
        await reg.resolve("alice", "train", "main", 0, "tensorboard")
        reg.entries[KEY].last_used -= 10**6
        assert await reg.cull_once() == [] and reg.entries[KEY].target is not None
        reg.start_culling()
        assert asyncio.all_tasks() == {asyncio.current_task()}  # no culling task was started

    run(refused_cull, idle_timeout_minutes=1.0)
    run(off, idle_timeout_minutes=0.0)


def test_terminal_is_given_for_a_running_task_only() -> None:
    async def body(reg: Registry, client: MemoryClient) -> None:
        url, headers, over = await reg.terminal("alice", "train", "main", 0)
        assert url.endswith("/terminals/main/0") and headers == {"Authorization": "Bearer x"}
        assert over == "/the/daemon/api.sock"  # the client's say: the local daemon's socket for that url
        assert (await refused(reg.terminal("alice", "train", "main", 3))).status_code == 404
        assert (await refused(reg.terminal("bob", "train", "main", 0))).status_code == 404
        client.task_state = "SUCCEEDED"
        assert (await refused(reg.terminal("alice", "train", "main", 0))).status_code == 409

    run(body)


def test_select_keeps_a_client_per_profile_and_refuses_unknown_names(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pai_jupyter.client.profiles import Profile, upsert_profile

    monkeypatch.setenv("PAI_JUPYTER_HOME", str(tmp_path))
    upsert_profile(Profile(name="other", url="http://127.0.0.1:9", username="bob", token="t0ken"), tmp_path)

    async def body(registry: Registry, client: MemoryClient) -> None:
        registry.entries[(JOB, "main", 0, "tensorboard")] = object()  # type: ignore[assignment]
        with pytest.raises(PaiHTTPError) as err:
            registry.select("nope")
        assert err.value.status_code == 404 and registry.current == "memory" and registry.entries
        other = registry.select("other")
        assert registry.client is other and other.username == "bob" and not registry.entries
        assert registry.select("memory") is client and registry.select("other") is other  # kept, not rebuilt

    run(body)
