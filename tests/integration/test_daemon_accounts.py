"""A user's task cannot become admin (issue 12 item 1): with the daemon as root, each user's tasks run as an OS
account of their own, their directories are theirs and private, the daemon's files unreadable from any task.
The attack of the audit: bob's job reads the daemon's runtime.json (the admin token), state.db (every secret)
and greps other users' task directories for a secret."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.core.accounts import Accounts, dedicated_name
from pai_jupyter.cluster.core.errors import ConflictJobError

from .conftest import kill_leftovers, start_daemon, v1

SECRET = "root-secret-planted-91ab"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="isolation by OS accounts needs a daemon run as root")

ATTACK = " ; ".join(
    [
        "echo uid=$(id -u)",
        'L="$PAI_USER_HOME/../../.."',
        'cat "$L/runtime.json" 2>/dev/null || echo DENIED-runtime',
        'cat "$L/state.db" >/dev/null 2>&1 || echo DENIED-state',
        'cat "$L/daemon.log" >/dev/null 2>&1 || echo DENIED-log',
        f'found=$(grep -r -l {SECRET} "$L" 2>/dev/null || true); echo "FOUND[$found]"',
        'echo mine > "$PAI_USER_HOME/note" && echo HOME-OK',
        "echo here > work-file && echo WORK-OK",
        'echo "home=$HOME"',
    ]
)


@root_only
def test_a_users_task_cannot_read_the_admin_token_or_other_users_files(tmp_path: Path) -> None:
    home = tmp_path / "pai-home"
    try:
        admin = start_daemon(home)
        secret_job = json.dumps(
            {
                "protocolVersion": 2,
                "name": "rootjob",
                "type": "job",
                "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "busybox"}],
                "secrets": {"pw": SECRET},
                "taskRoles": {
                    "main": {
                        "instances": 1,
                        "dockerImage": "img",
                        "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0},
                        "commands": ["echo <% $secrets.pw %> > mine.txt"],
                    }
                },
            }
        )
        assert admin.wait(admin.submit_ok(secret_job))["jobStatus"]["state"] == "SUCCEEDED"
        r = admin.http.post("/api/v2/local/users", json={"name": "hbob"})
        assert r.status_code == 201, r.text
        bob = admin.as_user(r.json()["token"])
        job = bob.submit_ok(v1("attack", ATTACK))
        d = bob.wait(job)
        out = bob.log(job, name="stdout")
        assert d["jobStatus"]["state"] == "SUCCEEDED", (d, out)
        account = pwd.getpwnam(dedicated_name("hbob"))
        assert f"uid={account.pw_uid}" in out and account.pw_uid != 0
        for refused in ("DENIED-runtime", "DENIED-state", "DENIED-log", "FOUND[]"):
            assert refused in out, out
        assert admin.token not in out
        assert "HOME-OK" in out and "WORK-OK" in out
        user_home = home / "local" / "users" / "hbob" / "home"
        assert f"home={user_home.resolve()}" in out or f"home={user_home}" in out
        for path in (user_home, user_home / "note"):
            st = path.stat()
            assert st.st_uid == account.pw_uid and st.st_mode & 0o077 == 0, path
        # the job's directory and the task's control part stay root's: the task's group may read, never write
        job_dir = next((home / "local" / "jobs").glob("hbob~attack"))
        for path in (job_dir, next(job_dir.glob("a0.*"))):
            st = path.stat()
            assert (st.st_uid, st.st_gid) == (0, account.pw_gid) and st.st_mode & 0o027 == 0, path
        assert next(job_dir.glob("a0.*/work")).stat().st_uid == account.pw_uid
        # the daemon's own files stay root's and private
        for name in ("runtime.json", "state.db"):
            st = (home / "local" / name).stat()
            assert st.st_uid == 0 and st.st_mode & 0o077 == 0
    finally:
        control.stop(home)
        kill_leftovers(home)


def test_without_isolation_a_second_user_is_refused_with_the_reason() -> None:
    """Not root and no Docker: a second user's tasks could act as the first (the admin)."""
    shared = Accounts("alice", "process", isolate=False)
    shared.admission("alice", {"alice"})  # the owner itself
    with pytest.raises(ConflictJobError) as err:
        shared.admission("bob", {"alice"})
    assert "the daemon is not root and Docker is not used" in err.value.message
    assert "--runtime docker" in err.value.message
    Accounts("alice", "docker", isolate=False).admission("bob", {"alice"})  # containers keep users apart
    Accounts("alice", "process", isolate=True).admission("bob", {"alice"})  # own accounts do too


def test_dedicated_account_names_are_valid_and_distinct() -> None:
    assert dedicated_name("bob") == "pai-bob"
    odd = [dedicated_name(n) for n in ("Bob.Smith", "bob.smith", "x" * 64)]
    assert len(set(odd)) == 3
    assert all(len(n) <= 32 and n.startswith("pai-") for n in odd)
