"""SSH for a user who is not the cluster's owner: with the daemon as root their tasks run as an OS
account of their own (cluster/core/accounts.py), and ssh must work for them as for the owner: their ``ssh``
plugin logins, a Horovod/MPI-style ``jobssh`` job whose tasks read the job key and pass the barrier. And a task
that plants links where the daemon reads ssh files (the job key, the ``.missing`` note, the user's stored keys)
gets nothing of root's from the daemon's routes."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from tests.helpers.daemon import Api, account_of, kill_leftovers, start_daemon
from tests.helpers.ssh import keypair, need_sshd, plugin_job, ssh
from tests.polling import wait_for

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="isolation by OS accounts needs a daemon run as root")
MARK = "root-only-9c41"


@pytest.fixture
def root_daemon(tmp_path: Path) -> Iterator[Api]:
    home = tmp_path / "pai-home"
    try:
        yield start_daemon(home)
    finally:
        control.stop(home)
        kill_leftovers(home)


def _log_with(api: Api, job: str, *texts: str, role: str = "main", timeout: float = 60) -> str:
    """The task's log once it holds one of ``texts``."""

    def holds() -> str | None:
        out = api.log(job, role=role)
        return out if any(t in out for t in texts) else None

    return wait_for(holds, timeout, f"{job} {role}'s log to say one of {texts}")


@root_only
def test_a_non_owners_jobssh_job_passes_its_barrier_and_their_login_works(root_daemon: Api, tmp_path: Path) -> None:
    need_sshd()
    key, pub = keypair(tmp_path)
    bob = root_daemon.new_user("sshbob")
    params = {"jobssh": True, "sshbarrier": True, "sshbarrierTimeout": 2, "userssh": {"type": "custom", "value": pub}}
    job = bob.submit_ok(
        plugin_job(
            "mpi",
            "sleep 300",
            params,
            worker="ssh main-0 'echo from main: $(id -un) $PAI_CURRENT_TASK_ROLE_NAME-$PAI_TASK_INDEX'; sleep 300",
        )
    )
    bob.wait(job, ("RUNNING",), timeout=60)
    account = account_of(root_daemon.home, "sshbob")  # made for bob's first task
    out = _log_with(bob, job, "from main:", "timed out", "Permission denied", role="worker", timeout=150)
    assert "pai ssh barrier: every task answers" in out, out
    assert f"from main: {account.pw_name} main-0" in out, out

    # the job key: the daemon's, readable by the group of the job's account only
    key_dir = root_daemon.home / "local" / "jobs" / "sshbob~mpi" / "ssh"
    for path, mode in ((key_dir, 0o750), (key_dir / "id_ed25519", 0o640)):
        st = path.lstat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, account.pw_gid, mode), path
    other = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(key_dir / "id_ed25519")],
        capture_output=True,
    )
    assert other.returncode != 0 and b"PRIVATE KEY" not in other.stdout

    # the ssh plugin's login, as the account, the host key checked against the one the daemon reports
    info = bob.http.get(f"/api/v2/local/jobs/{job}/ssh").json()
    assert info["user"] == account.pw_name
    [main] = [c for c in info["containers"] if c["id"] == "main-0"]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{main['sshPort']} {main['hostKey']}\n")
    r = ssh(key, main["sshPort"], "id -un; echo index=$PAI_TASK_INDEX", user=account.pw_name, known_hosts=known)
    assert r.returncode == 0 and r.stdout.split() == [account.pw_name, "index=0"], r.stderr
    bob.stop(job)


@root_only
def test_links_a_task_plants_where_the_daemon_reads_ssh_files_give_nothing_of_roots(
    root_daemon: Api, tmp_path: Path
) -> None:
    need_sshd()
    secret = tmp_path / "root-only"
    secret.mkdir(mode=0o700)
    _, pub = keypair(tmp_path, "id_root")
    files = {
        "id_ed25519": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{MARK}\n-----END OPENSSH PRIVATE KEY-----\n",
        "id_ed25519.pub": f"{' '.join(pub.split()[:2])} {MARK}\n",
        "note": f"{MARK}\n",
        "keys.json": json.dumps([{"title": "planted", "value": MARK}]),
    }
    for name, text in files.items():
        (secret / name).write_text(text)
        (secret / name).chmod(0o600)
    attack = " ; ".join(
        [
            'J=$(dirname "$PAI_TASK_DIR")',
            f'{{ mv "$J/ssh" "$J/ssh.moved" && ln -s {secret} "$J/ssh" && echo PLANTED-keydir; }} || true',
            f'{{ ln -sf {secret}/note "$PAI_TASK_DIR/service-ssh.missing" && echo PLANTED-missing; }} || true',
            f'{{ mkdir -p "$PAI_TASK_DIR/run" && ln -sf {secret}/note "$PAI_TASK_DIR/run/service-ssh.missing" '
            "&& echo PLANTED-run; } || true",
            f'{{ ln -sf {secret}/keys.json "$PAI_USER_HOME/../ssh_keys.json" && echo PLANTED-keys; }} || true',
            "echo planted; sleep 300",
        ]
    )
    bob = root_daemon.new_user("sshmallory")
    job = bob.submit_ok(plugin_job("plant", attack, {}))
    out = _log_with(bob, job, "planted")
    assert "PLANTED-" in out, out  # where the task directory's layout lets a task write, it planted a link

    served = [
        bob.http.get(f"/api/v2/local/jobs/{job}/ssh"),
        bob.http.get(f"/api/v2/local/jobs/{job}/ssh/key"),
        bob.http.get("/api/v2/local/ssh-keys"),
    ]
    for r in served:
        assert MARK not in r.text, (r.request.url, r.text)
    info = served[0].json()
    assert info["containers"][0]["problem"] is None
    bob.stop(job)
