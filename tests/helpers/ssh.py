"""Shared by the ssh tests: a key pair, a real ssh/scp client, a job with the ssh plugin, a stand-in sshd."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.polling import wait_for

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
    key: Path,
    port: int,
    command: str,
    user: str = "root",
    host: str = "127.0.0.1",
    timeout: float = 30,
    known_hosts: Path | None = None,
    pty: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``known_hosts``: check the host key against that file (else any host key is taken); ``pty``: ask for a
    terminal, as an interactive login does."""
    opts = SSH_OPTS
    if known_hosts is not None:
        opts = [
            *SSH_OPTS[:2],
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={known_hosts}",
            *SSH_OPTS[6:],
        ]
    return subprocess.run(
        ["ssh", *opts, *(["-tt"] if pty else []), "-i", str(key), "-p", str(port), f"{user}@{host}", command],
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


def plugin_job(name: str, command: str, params: dict[str, Any], instances: int = 1, worker: str | None = None) -> str:
    """A v2 job whose tasks run the ssh plugin with ``params``; ``worker``: a second role's command, whose success
    is enough for the job's."""
    roles = {
        "main": {
            "instances": instances,
            "dockerImage": "img",
            "commands": [command],
            "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
        }
    }
    if worker:
        roles["worker"] = {
            "instances": 1,
            "dockerImage": "img",
            "commands": [worker],
            "completion": {"minSucceededInstances": 1},
            "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
        }
    return yaml.safe_dump(
        {
            "protocolVersion": 2,
            "name": name,
            "type": "job",
            "prerequisites": [{"name": "img", "type": "dockerimage", "uri": "pai-test/busybox:latest"}],
            "taskRoles": roles,
            "extras": {"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh", "parameters": params}]},
        }
    )


def start_sshd(d: Path, authorized: str, port: int) -> subprocess.Popen[bytes]:
    """A real sshd on 127.0.0.1:``port`` with a host key of its own (made in ``d``), letting ``authorized`` in."""
    d.mkdir(parents=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host")], check=True)
    (d / "authorized_keys").write_text(authorized + "\n")
    (d / "sshd_config").write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {d / 'host'}",
                f"AuthorizedKeysFile {d}/authorized_keys",
                "UsePAM no",
                "StrictModes no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "PidFile none",
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    return subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")],
        stdout=subprocess.DEVNULL,
        stderr=open(d / "log", "wb"),  # the child writes it; closed with the process
    )


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def impostor(d: Path, authorized: str, port: int) -> subprocess.Popen[bytes]:
    """Once ``port`` is free (its sshd went away): another sshd there, with a host key of its own, letting in the
    same key: what a host key check must refuse."""
    wait_for(lambda: not listening(port), 30, f"port {port} to be free")
    proc = start_sshd(d, authorized, port)
    wait_for(lambda: listening(port), 30, "the impostor sshd")
    return proc
