"""The TensorBoard this server starts over an ended task's logdir: only a real directory on this machine
(a symlink, a relative path, a logdir spec are refused), behind a token guard that refuses every request without
the token, and stopped when idle."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from pai_jupyter.server.common import PaiHTTPError
from pai_jupyter.server.ended_tensorboard import EndedBoards, local_logdir
from pai_jupyter.server.tensorboard_guard import guard


def test_only_a_real_local_directory_is_served(tmp_path: Path) -> None:
    real = tmp_path / "logs"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert local_logdir(str(real)) == real
    for refused in (str(tmp_path / "link"), "logs", "/pai/output/logs-nowhere", "a:/x,b:/y", None, 3):
        assert local_logdir(refused) is None, refused


def test_the_guard_wants_the_token() -> None:
    seen: list[str] = []

    def app(environ: dict, start_response: object) -> list[bytes]:
        return [b"board"]

    guarded = guard(app, b"token s3cret")
    assert guarded({"HTTP_AUTHORIZATION": "token s3cret"}, lambda *a: None) == [b"board"]
    assert guarded({}, lambda status, headers: seen.append(status)) != [b"board"]
    assert guarded({"HTTP_AUTHORIZATION": "token wrong"}, lambda status, headers: seen.append(status)) != [b"board"]
    assert seen == ["403 Forbidden", "403 Forbidden"]


def test_a_board_starts_answers_only_with_its_token_and_is_culled(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    boards = EndedBoards()

    async def body() -> None:
        with pytest.raises(PaiHTTPError) as refused:
            await boards.target("alice~train", "main", 0, {"logdir": "/pai/output/logs"})
        assert refused.value.status_code == 409 and "not on this machine" in refused.value.message
        host, port, token = await boards.target("alice~train", "main", 0, {"logdir": str(tmp_path)})
        again = await boards.target("alice~train", "main", 0, {"logdir": str(tmp_path)})
        assert again == (host, port, token)  # reused, not started twice
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"http://{host}:{port}/data/runs")).status_code == 403
            ok = await http.get(f"http://{host}:{port}/data/runs", headers={"Authorization": f"token {token}"})
            assert ok.status_code == 200 and ok.json() == []

    try:
        asyncio.run(body())
        proc = boards.boards[("alice~train", "main", 0)].proc
        assert boards.cull(3600) == 0 and proc.poll() is None
        assert boards.cull(0) == 1 and proc.poll() is not None
    finally:
        boards.close()


def test_root_does_not_serve_a_directory_others_may_write(tmp_path: Path) -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip("the rule is root's")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)

    async def body() -> None:
        with pytest.raises(PaiHTTPError) as refused:
            await EndedBoards().target("alice~train", "main", 0, {"logdir": str(shared)})
        assert refused.value.status_code == 409 and "other accounts" in refused.value.message

    asyncio.run(body())


def test_the_registry_serves_an_ended_tasks_tensorboard_from_here(tmp_path: Path) -> None:
    """The task has ended (starting its TensorBoard is refused): the registry's target is the board this server
    started over the logdir the cluster lists, with that board's token; a container path stays a 409."""
    pytest.importorskip("tensorboard")
    from pai_jupyter.client import PaiError
    from pai_jupyter.server.registry import Registry

    from .test_server_registry import JOB, MemoryClient, refused, run

    async def body(reg: Registry, client: MemoryClient) -> None:
        client.action_error = PaiError("task is SUCCEEDED, not running", status=400)
        item = client.items[JOB][0]
        item["logdir"] = "/pai/output/logs"
        exc = await refused(reg.resolve("alice", "train", "main", 0, "tensorboard"))
        assert exc.status_code == 409 and "not on this machine" in exc.message
        item["logdir"] = str(tmp_path)
        try:
            _, target = await reg.resolve("alice", "train", "main", 0, "tensorboard")
            assert target.host == "127.0.0.1" and target.port != 6006 and target.token
            async with httpx.AsyncClient() as http:
                url = f"http://{target.host}:{target.port}/data/runs"
                ok = await http.get(url, headers={"Authorization": f"token {target.token}"})
                assert ok.status_code == 200
        finally:
            reg.ended.close()

    run(body, MemoryClient(state="stopped"))
