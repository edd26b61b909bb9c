"""Shared by the ssh tests: a key pair, a real ssh/scp client, polling for a task's sshd."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SSH_OPTS = [
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "LogLevel=ERROR",
]


def need_sshd() -> None:
    if not Path("/usr/sbin/sshd").exists() or not shutil.which("ssh"):
        pytest.skip("no /usr/sbin/sshd or ssh client (apt-get install openssh-server openssh-client; .ci/run does)")


def keypair(d: Path, name: str = "id_test") -> tuple[Path, str]:
    key = d / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key, key.with_suffix(".pub").read_text().strip()


def ssh(
    key: Path, port: int, command: str, user: str = "root", host: str = "127.0.0.1", timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", *SSH_OPTS, "-i", str(key), "-p", str(port), f"{user}@{host}", command],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def scp(key: Path, port: int, src: Path, dest: str, user: str = "root") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["scp", *SSH_OPTS, "-i", str(key), "-P", str(port), str(src), f"{user}@127.0.0.1:{dest}"],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
