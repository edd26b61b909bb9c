"""The TensorBoard this server starts over an ended task's logdir: only a directory on this machine (a relative
path, a logdir spec, a link another account could have made are refused), read as the account that can change it,
behind a token guard that refuses every request without the token, and stopped when idle."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from pai_jupyter.common.tensorboard_guard import guard
from pai_jupyter.server.common import PaiHTTPError
from pai_jupyter.server.ended_tensorboard import EndedBoards, Logdir, LogdirRefused, local_logdir, vet_logdir

NOBODY = 65534


def test_only_a_real_local_directory_is_served(tmp_path: Path) -> None:
    """A link this server's own account (or root) made is followed, to the directory it names: TensorBoard gets
    a path with no link in it."""
    real = tmp_path / "logs"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "up").symlink_to("..")
    assert local_logdir(str(real)) == real
    assert local_logdir(str(tmp_path / "link")) == real
    assert local_logdir(str(tmp_path / "up" / tmp_path.name / "link")) == real
    assert local_logdir(str(real / ".." / "logs")) == real
    for refused in ("logs", "/pai/output/logs-nowhere", "a:/x,b:/y", None, 3):
        assert local_logdir(refused) is None, refused


def test_a_link_another_account_could_have_made_is_not_followed(tmp_path: Path) -> None:
    """The attack: a task's account replaces a directory it owns on the logdir's path (the Estimator's
    ``ml/output``) with a link to a directory of root's, so that this server (root) would serve it as root."""
    if os.geteuid() != 0:
        pytest.skip("the rule is root's (it needs a second account)")
    root_only = tmp_path / "root-only"
    (root_only / "logs").mkdir(parents=True)
    root_only.chmod(0o700)
    ml = tmp_path / "job" / "ml"
    ml.mkdir(parents=True)
    os.chown(ml, NOBODY, NOBODY)
    (ml / "output").symlink_to(root_only)
    with pytest.raises(
        LogdirRefused, match=rf"goes through a link \({ml / 'output'}\) that another account \(uid {NOBODY}\)"
    ):
        vet_logdir(str(ml / "output" / "logs"))
    assert local_logdir(str(ml / "output" / "logs")) is None
    (ml / "output").unlink()
    (ml / "output" / "logs").mkdir(parents=True)  # (root's, in the task's directory: the task could swap it)
    assert vet_logdir(str(ml / "output" / "logs")) == Logdir(ml / "output" / "logs", (NOBODY, NOBODY))


def test_root_reads_as_root_only_what_no_other_account_can_change(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the rule is root's (it needs a second account)")
    top = tmp_path / "runs"
    (top / "a").mkdir(parents=True)
    assert vet_logdir(str(top)) == Logdir(top, None)
    os.chown(top / "a", NOBODY, NOBODY)  # a run's directory of another account: it could put a link in it
    assert vet_logdir(str(top)) == Logdir(top, (NOBODY, NOBODY))
    (top / "b").mkdir()
    os.chown(top / "b", NOBODY - 1, NOBODY - 1)
    with pytest.raises(LogdirRefused, match="more than one account"):
        vet_logdir(str(top))


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
            await boards.target("alice~train", "main", 0, "/pai/output/logs")
        assert refused.value.status_code == 409 and "not on this machine" in refused.value.message
        host, port, token = await boards.target("alice~train", "main", 0, str(tmp_path))
        again = await boards.target("alice~train", "main", 0, str(tmp_path))
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
    if os.geteuid() != 0:
        pytest.skip("the rule is root's")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)

    async def body() -> None:
        with pytest.raises(PaiHTTPError) as refused:
            await EndedBoards().target("alice~train", "main", 0, str(shared))
        assert refused.value.status_code == 409 and "other accounts" in refused.value.message

    asyncio.run(body())


def test_the_registry_serves_an_ended_tasks_tensorboard_from_here(tmp_path: Path) -> None:
    """The task has ended (starting its TensorBoard is refused): the registry's target is the board this server
    started over the logdir the cluster lists, with that board's token; a container path stays a 409."""
    pytest.importorskip("tensorboard")
    from pai_jupyter.client import PaiError
    from pai_jupyter.server.registry import Registry
    from tests.helpers.registry import JOB, MemoryClient, refused, run

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
