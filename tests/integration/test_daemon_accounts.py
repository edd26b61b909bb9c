"""A user's task cannot become admin: with the daemon as root, each user's tasks run as an OS
account of their own, their directories are theirs and private, the daemon's files unreadable from any task.
The attack of the audit: bob's job reads the daemon's runtime.json (the admin token), state.db (every secret)
and greps other users' task directories for a secret.

A platform user named after a host account (a service account above UID_MAX, a regular one, a
``pai-`` one the daemon did not make) never runs as it; only an admin's mapping picks a regular account; removing
a user stops their jobs, revokes their tokens and removes the account the daemon made."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.core.accounts import ACCOUNT_NAME, SHELL, Accounts, UidRanges, dedicated_name, pids_of
from pai_jupyter.cluster.core.errors import ConflictJobError
from pai_jupyter.cluster.core.hostaccounts import HomeAccounts, comment, home_tag
from tests.helpers.cli import pai
from tests.helpers.daemon import Api, account_of, kill_leftovers, start_daemon, v1
from tests.polling import wait_for

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
        account = account_of(home, "hbob")
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
    home = Path("/nonexistent")
    shared = Accounts("alice", "process", home=home, isolate=False)
    shared.admission("alice", {"alice"})  # the owner itself
    with pytest.raises(ConflictJobError) as err:
        shared.admission("bob", {"alice"})
    assert "the daemon is not root and Docker is not used" in err.value.message
    assert "--runtime docker" in err.value.message
    Accounts("alice", "docker", home=home, isolate=False).admission("bob", {"alice"})  # containers keep users apart
    Accounts("alice", "process", home=home, isolate=True).admission("bob", {"alice"})  # own accounts do too


def test_dedicated_account_names_are_valid_and_distinct() -> None:
    assert dedicated_name("bob") == "pai-bob"
    odd = [dedicated_name(n) for n in ("Bob.Smith", "bob.smith", "x" * 64)]
    assert len(set(odd)) == 3
    assert all(len(n) <= 32 and n.startswith("pai-") for n in odd)
    # a second home's account for a user whose pai-<user> another home has: its own, valid, one per home
    ranges = UidRanges()
    own = [HomeAccounts(Path(h), ranges.system).names(u)[1] for h in ("/a", "/b") for u in ("bob", "x" * 64)]
    assert len(set(own) | set(odd) | {"pai-bob"}) == 8
    assert all(ACCOUNT_NAME.fullmatch(n) and len(n) <= 32 and n.startswith("pai-") for n in own)


def test_login_defs_ranges_are_read_with_their_defaults(tmp_path: Path) -> None:
    defs = tmp_path / "login.defs"
    defs.write_text("# comment\nUID_MIN\t\t\t 2000\nUID_MAX  50000\nSYS_UID_MIN 200\nGID_MIN 7\nUID_MAX_X 1\n")
    r = UidRanges.read(defs)
    assert (r.uid_min, r.uid_max, r.sys_uid_min, r.sys_uid_max) == (2000, 50000, 200, 1999)
    assert UidRanges.read(tmp_path / "missing") == UidRanges()
    assert r.regular(2000) and not r.regular(50001) and not r.regular(1999) and not r.regular(65534)
    assert r.system(1999) and not r.system(0) and not r.system(2000)


# ---- real accounts ----------------------------------------------------------------------------------------
@contextlib.contextmanager
def host_accounts(*names: str) -> Iterator[None]:
    """Remove these OS accounts (and their groups) before and after: the test makes some, the daemon others."""

    def clean() -> None:
        for name in names:
            subprocess.run(["userdel", name], capture_output=True, check=False)
            subprocess.run(["groupdel", name], capture_output=True, check=False)

    clean()
    try:
        yield
    finally:
        clean()


def useradd(*args: str) -> pwd.struct_passwd:
    subprocess.run(["useradd", "--no-create-home", *args], check=True, capture_output=True)
    return pwd.getpwnam(args[-1])


def uid_of_job(api: Api, name: str, before: str = "true") -> int:
    """The uid a job of ``api``'s user runs as (``before``: a command that must succeed first)."""
    job = api.submit_ok(v1(name, f"{before} && id -u"))
    detail = api.wait(job)
    out = api.log(job, name="stdout")
    assert detail["jobStatus"]["state"] == "SUCCEEDED", (detail, out)
    return int(out.split()[-1])


@root_only
def test_a_user_named_after_a_host_account_never_runs_as_it(tmp_path: Path) -> None:
    """The audit: a platform user named ``slurm`` ran as the real ``slurm`` service account (any uid >= 1000 was
    taken by name, even above UID_MAX). Now a name picks only the daemon's own ``pai-`` account. The host accounts
    have names of this run's own: another run of the suite on the host may make and remove its own meanwhile."""
    home = tmp_path / "pai-home"
    ranges = UidRanges.read()
    high = next(u for u in range(ranges.uid_max + 101, ranges.uid_max + 5000) if not _uid_used(u))
    x = secrets.token_hex(3)
    svc, reg, squat, oldie, other = f"svc{x}", f"reg{x}", f"squat{x}", f"oldie{x}", f"other{x}"
    with host_accounts(svc, reg, f"pai-{squat}", f"pai-{oldie}", f"pai-{other}"):
        service = useradd("--uid", str(high), "--shell", "/usr/sbin/nologin", svc)
        regular = useradd(reg)
        useradd("--system", f"pai-{squat}")  # a pai- account of someone else's (no comment of ours)
        # accounts made by an older daemon (their comments name no home), with nologin, which the ssh plugin's logins
        # cannot use: claimed by the home whose user's home directory is theirs, left to the others
        legacy = ("--system", "--shell", "/usr/sbin/nologin", "--comment")
        old = useradd(*legacy, f"pai_jupyter tasks of {oldie}", f"pai-{oldie}")
        elsewhere = useradd(*legacy, f"pai_jupyter tasks of {other}", f"pai-{other}")
        try:
            admin = start_daemon(home)
            (home / "local" / "users" / oldie / "home").mkdir(parents=True)
            os.chown(home / "local" / "users" / oldie / "home", old.pw_uid, old.pw_gid)
            for user, account in ((svc, service), (reg, regular)):
                uid = uid_of_job(admin.new_user(user), f"as-{user}")
                assert uid != account.pw_uid, f"the platform user {user}'s task ran as the host's account {user}"
                own = pwd.getpwnam(dedicated_name(user))
                assert uid == own.pw_uid, (user, uid, own)
                assert own.pw_gecos == comment(user, home_tag(home / "local")) and ranges.system(own.pw_uid)
                assert own.pw_shell == SHELL and _shadow(own.pw_name).startswith("!")  # locked: no password
            r = admin.http.post("/api/v2/local/users", json={"name": squat})
            assert r.status_code == 409 and "pai_jupyter did not make it" in r.json()["message"], r.text
            assert uid_of_job(admin.new_user(oldie), "old-account") == pwd.getpwnam(f"pai-{oldie}").pw_uid
            assert pwd.getpwnam(f"pai-{oldie}").pw_shell == SHELL
            assert pwd.getpwnam(f"pai-{oldie}").pw_gecos == comment(oldie, home_tag(home / "local"))
            assert uid_of_job(admin.new_user(other), "not-mine") == account_of(home, other).pw_uid != elsewhere.pw_uid
            assert account_of(home, other).pw_name.startswith(f"pai-{other}-")
            assert pwd.getpwnam(f"pai-{other}") == elsewhere  # untouched: another home's, for all this one knows
            # an admin's explicit mapping picks a regular account, and only a regular one, for one user only
            assert uid_of_job(admin.new_user("mapped1", account=reg), "mapped") == regular.pw_uid
            for account, status, words in (
                (svc, 400, "not a regular account"),
                ("daemon", 400, "not a regular account"),
                ("root", 400, "not a regular account"),
                ("no-such-acct", 400, "no OS account"),
                (reg, 409, "runs the tasks of user mapped1"),
            ):
                r = admin.http.post("/api/v2/local/users", json={"name": "mapped2", "account": account})
                assert r.status_code == status and words in r.json()["message"], (account, r.text)
            # an existing user is mapped (e.g. one who ran as the account of their name before): not while a job runs
            regacct = admin.as_user(admin.http.post("/api/v2/local/users", json={"name": reg}).json()["token"])
            running = regacct.submit_ok(v1("running", "sleep 300"))
            regacct.wait(running, ("RUNNING",))
            r = admin.http.post("/api/v2/local/users", json={"name": reg, "account": reg})
            assert r.status_code == 409 and "stop them first" in r.json()["message"], r.text
            regacct.stop(running)
            regacct.wait(running)
            r = admin.http.delete("/api/v2/local/users/mapped1")  # frees the account; a host account stays
            assert f"the host's account {reg}, which stays" in r.json()["message"], r.text
            assert pwd.getpwnam(reg).pw_uid == regular.pw_uid
            r = admin.http.post("/api/v2/local/users", json={"name": reg, "account": reg})
            assert r.status_code == 201, r.text
            assert uid_of_job(regacct, "mapped-now", 'echo x > "$PAI_USER_HOME/mine"') == regular.pw_uid
        finally:
            control.stop(home)
            kill_leftovers(home)


def _uid_used(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _shadow(name: str) -> str:
    for line in Path("/etc/shadow").read_text().splitlines():
        if line.split(":")[0] == name:
            return line.split(":")[1]
    raise AssertionError(f"{name} is not in /etc/shadow")


def _owners(*tops: Path) -> set[int]:
    out = set()
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(top):
            out |= {os.lstat(os.path.join(dirpath, n)).st_uid for n in (".", *dirnames, *filenames)}
    return out


@root_only
def test_removing_a_user_stops_their_jobs_revokes_their_tokens_and_removes_their_account(tmp_path: Path) -> None:
    """The audit: no route or command removed a user; their token, jobs and ``pai-`` account outlived them."""
    home = tmp_path / "pai-home"
    try:
        admin = start_daemon(home)
        hrm = admin.new_user("hrm", password="hunter22")
        job = hrm.submit_ok(v1("sleeper", 'echo mine > "$PAI_USER_HOME/note"; sleep 300'))
        hrm.wait(job, ("RUNNING",))
        account = account_of(home, "hrm")  # pai-hrm, unless another cluster on the host has a user hrm too
        wait_for(lambda: pids_of(account.pw_uid), 30, f"the sleeper to run as {account.pw_name}")
        assert hrm.http.delete("/api/v2/local/users/hrm").status_code == 403  # admins only
        # a process of the account's that no task holds (as an escaped one would be): the account waits for it
        stray = subprocess.Popen(["sleep", "300"], user=account.pw_uid, group=account.pw_gid)
        try:
            r = admin.http.delete("/api/v2/local/users/hrm")
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["stoppedJobs"] == ["hrm~sleeper"] and body["revokedTokens"] == 1
            assert body["account"] == account.pw_name and body["accountRemoved"] is False, body
            assert f"processes still run as it (pids {stray.pid})" in body["message"]
            assert admin.detail(job)["jobStatus"]["state"] == "STOPPED"
            assert hrm.http.get("/api/v2/jobs").status_code == 401  # the old token
            login = {"username": "hrm", "password": "hunter22"}
            assert admin.http.post("/api/v2/authn/basic/login", json=login).json()["code"] == "NoUserError"
        finally:
            stray.kill()
            stray.wait()
        r = admin.http.delete("/api/v2/local/users/hrm")  # again, once the process is gone
        assert r.status_code == 200 and r.json()["accountRemoved"] is True, r.text
        with pytest.raises(KeyError):
            pwd.getpwnam(account.pw_name)
        assert pids_of(account.pw_uid) == []
        # its files are root's now: an account made later may get the freed uid
        assert _owners(home / "local" / "users" / "hrm", home / "local" / "jobs" / "hrm~sleeper") == {0}
        assert admin.http.delete("/api/v2/local/users/hrm").status_code == 404
        assert admin.http.delete(f"/api/v2/local/users/{pwd.getpwuid(os.geteuid()).pw_name}").status_code == 409
        # a user of that name added again gets a new account and a home it can write; the command removes it
        again = admin.new_user("hrm")
        uid = uid_of_job(again, "again", 'echo again > "$PAI_USER_HOME/note2"')
        made = account_of(home, "hrm")
        assert uid == made.pw_uid
        r = pai("cluster", "user", "remove", "hrm", "--yes", home=home)
        assert r.returncode == 0 and f"the OS account {made.pw_name} was removed" in r.stdout, (r.stdout, r.stderr)
        assert again.http.get("/api/v2/jobs").status_code == 401
        with pytest.raises(KeyError):
            pwd.getpwnam(made.pw_name)
    finally:
        control.stop(home)
        kill_leftovers(home)


@root_only
def test_two_clusters_on_one_host_never_share_or_remove_each_others_accounts(tmp_path: Path) -> None:
    """The flaky CI run: beside another run of the suite, two daemons each had a user hrm and both ran their tasks as
    ``pai-hrm``: one's removal counted the other's task among the account's processes, and the other removed the
    account while the first's task ran as it. Each home now has its own account, marked with the home."""
    user = f"twin{secrets.token_hex(3)}"
    homes = (tmp_path / "a" / "pai-home", tmp_path / "b" / "pai-home")
    try:
        admins = [start_daemon(h) for h in homes]
        users = [a.new_user(user) for a in admins]
        jobs = [u.submit_ok(v1("sleeper", "sleep 300")) for u in users]
        for u, job in zip(users, jobs, strict=True):
            u.wait(job, ("RUNNING",))
        first, second = (account_of(h, user) for h in homes)
        assert first.pw_name == dedicated_name(user) and second.pw_name.startswith(f"pai-{user}-"), (first, second)
        assert first.pw_uid != second.pw_uid and first.pw_gid != second.pw_gid
        wait_for(lambda: pids_of(first.pw_uid) and pids_of(second.pw_uid), 30, "both sleepers to run")
        # the second cluster removes its user: its account goes, not the first's, whose task runs on
        r = admins[1].http.delete(f"/api/v2/local/users/{user}")
        assert r.status_code == 200 and r.json()["account"] == second.pw_name, r.text
        assert r.json()["accountRemoved"] is True, r.text
        assert pwd.getpwnam(first.pw_name) == first and pids_of(first.pw_uid)
        assert users[0].detail(jobs[0])["jobStatus"]["state"] == "RUNNING"
        with pytest.raises(KeyError):
            pwd.getpwnam(second.pw_name)
        # added again there, the user gets that home's own account again, never the first's
        assert uid_of_job(admins[1].new_user(user), "again") not in (first.pw_uid, 0)
        # the first's removal stops only its own job and counts only its own processes
        r = admins[0].http.delete(f"/api/v2/local/users/{user}")
        assert r.status_code == 200 and r.json()["accountRemoved"] is True, r.text
        assert r.json()["account"] == first.pw_name, r.text
    finally:
        for h in homes:
            control.stop(h)
            kill_leftovers(h)
