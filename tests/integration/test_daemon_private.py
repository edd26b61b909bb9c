"""Secrets stay private on disk: the home and everything under it is its owner's alone, and a
task's script on disk never holds the job's secrets. The attack: another OS account greps the home."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from tests.helpers.daemon import Api, kill_leftovers, start_daemon

SECRET = "pw-planted-6c0ffee"
REGISTRY_PASSWORD = "reg-planted-badc0de"
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("runuser"), reason="needs root and runuser to act as another account"
)


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A directory everyone may traverse (like /home/alice), so only the home's own modes protect it."""
    parent = Path(tempfile.mkdtemp(prefix="pai-private-", dir="/tmp"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "nobody", "--", *argv], capture_output=True, text=True, timeout=60)


def secret_job() -> str:
    return json.dumps(
        {
            "protocolVersion": 2,
            "name": "private",
            "type": "job",
            "prerequisites": [
                {
                    "name": "img",
                    "type": "dockerimage",
                    "uri": "pai-test/busybox:latest",
                    "auth": {"username": "me", "password": REGISTRY_PASSWORD, "registryuri": "example.com"},
                }
            ],
            "secrets": {"pw": SECRET},
            "taskRoles": {
                "main": {
                    "instances": 1,
                    "dockerImage": "img",
                    "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": 0},
                    "commands": [
                        'test "<% $secrets.pw %>" = pw-planted-6c0ffee',
                        "echo the secret is <% $secrets.pw %>",
                    ],
                }
            },
        }
    )


def test_another_account_finds_no_secret_in_the_home(open_parent: Path) -> None:
    home = open_parent / "pai-home"
    # a home left by an older version: readable by everyone
    (home / "local").mkdir(parents=True)
    (home / "local").chmod(0o755)
    old = home / "local" / "old.log"
    old.write_text(f"an old line with {SECRET}\n")
    old.chmod(0o644)
    try:
        api: Api = start_daemon(home)
        job = api.submit_ok(secret_job())
        d = api.wait(job)
        assert d["jobStatus"]["state"] == "SUCCEEDED", d
        assert SECRET in api.log(job, name="stdout")  # the user's own log holds what the task printed
        # the attack: another account greps the home, and reads the daemon's files by name
        found = as_nobody("grep", "-r", "-l", "-e", SECRET, "-e", REGISTRY_PASSWORD, str(home))
        assert found.stdout == "", f"readable by nobody: {found.stdout}"
        assert "Permission denied" in found.stderr
        for name in ("runtime.json", "state.db", "daemon.log"):
            assert as_nobody("cat", str(home / "local" / name)).returncode != 0
        # as root the secrets are there (the test can fail), but never in a task's script
        holders = subprocess.run(["grep", "-r", "-l", "-e", SECRET, str(home)], capture_output=True, text=True)
        assert "state.db" in holders.stdout and "stdout" in holders.stdout
        scripts = list(home.rglob("command.sh"))
        assert scripts and all(SECRET not in p.read_text() for p in scripts)
        assert "******" in scripts[0].read_text()
        # and every path under the home is its owner's only; a daemon run as root lets other accounts (its users'
        # tasks) pass through the directories above their own, never list them (cluster/core/accounts.py)
        passages = {home, home / "local", home / "local" / "jobs", home / "local" / "users"}
        for path in [home, *home.rglob("*")]:
            if path.is_symlink():
                continue
            mode = stat.S_IMODE(path.lstat().st_mode)
            allowed = 0o011 if path in passages and os.geteuid() == 0 else 0
            if path == home / "local" / "api.sock":  # the API's socket: every account may connect (a token is
                allowed = 0o066  # still needed: test_local_channel.py), and it holds no content to read
            assert mode & 0o077 & ~allowed == 0, f"{path} has mode {oct(mode)}"
    finally:
        control.stop(home)
        kill_leftovers(home)
