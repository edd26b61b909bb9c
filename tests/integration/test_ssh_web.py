"""Web SSH: the terminal route of a remote OpenPAI profile opens an SSH session to the task's sshd.

A stand-in OpenPAI (v2 routes only) says where the task's sshd is; a real sshd on 127.0.0.1 plays the task.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tornado.web
import yaml
from tornado.httpclient import HTTPClientError

from tests.helpers.jupyter_fixture import free_port, jupyter, task_terminal, task_url
from tests.helpers.ssh import impostor, keypair, need_sshd, start_sshd
from tests.helpers.standin import serving

SSH_PLUGIN = {"extras": {"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh", "parameters": {"jobssh": True}}]}}


def _job(name: str, port: int, plugin: bool = True) -> dict[str, Any]:
    status = {"name": name, "username": "root", "state": "RUNNING", "totalTaskNumber": 1, "totalGpuNumber": 0}
    task = {"taskIndex": 0, "taskState": "RUNNING", "containerIp": "127.0.0.1", "containerPorts": {"ssh": str(port)}}
    config = {"protocolVersion": 2, "name": name, "type": "job", **(SSH_PLUGIN if plugin else {})}
    return {
        "detail": {"name": name, "jobStatus": status, "taskRoles": {"main": {"taskStatuses": [task]}}},
        "status": status,
        "config": yaml.safe_dump(config),
    }


class OpenPai(tornado.web.RequestHandler):
    def initialize(self, jobs: dict[str, dict[str, Any]]) -> None:
        self.jobs = jobs

    def get(self, path: str) -> None:
        parts = path.split("/")
        if path == "info":
            self.write({"name": "OpenPAI", "version": "v1.8.0"})
        elif path == "jobs":
            self.write({"totalCount": len(self.jobs), "data": [j["status"] for j in self.jobs.values()]})
        elif len(parts) >= 2 and parts[0] == "jobs" and parts[1].removeprefix("root~") in self.jobs:
            job = self.jobs[parts[1].removeprefix("root~")]
            if len(parts) == 2:
                self.write(job["detail"])
            elif parts[2:] == ["config"]:
                self.set_header("Content-Type", "text/yaml")
                self.write(job["config"])
        else:
            self.set_status(404)
            self.write({"code": "NoJobError", "message": "not found"})


@pytest.fixture
def sshds(tmp_path: Path) -> Iterator[dict[str, Any]]:
    need_sshd()
    key, pub = keypair(tmp_path)
    _, other = keypair(tmp_path, "id_other")
    good_port, locked_port = free_port(), free_port()
    procs = {
        "good": start_sshd(tmp_path / "sshd-good", pub, good_port),
        "locked": start_sshd(tmp_path / "sshd-locked", other, locked_port),  # lets in another key only
    }
    yield {"key": key, "pub": pub, "good": good_port, "locked": locked_port, "closed": free_port(), "procs": procs}
    for p in procs.values():
        p.terminate()
        p.wait(10)


@pytest.fixture
def openpai(sshds: dict[str, Any]) -> Iterator[str]:
    jobs = {
        "web": _job("web", sshds["good"]),
        "nossh": _job("nossh", sshds["good"], plugin=False),
        "down": _job("down", sshds["closed"]),
        "locked": _job("locked", sshds["locked"]),
    }
    with serving(tornado.web.Application([(r"/api/v2/(.*)", OpenPai, {"jobs": jobs})])) as url:
        yield url


def test_web_ssh_to_a_remote_openpai_task(
    openpai: str, sshds: dict[str, Any], pai_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("asyncssh", reason="a dependency of pai_jupyter (pip install -e .)")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_bytes(sshds["key"].read_bytes())
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    monkeypatch.setenv("HOME", str(home))  # the Jupyter server's default identity: ~/.ssh/id_ed25519
    pai_home.mkdir(parents=True, exist_ok=True)
    (pai_home / "clusters.yaml").write_text(
        yaml.safe_dump({"clusters": [{"name": "remote", "url": openpai, "username": "root", "token": "t0ken"}]})
    )
    assert getpass.getuser() == "root"  # the stand-in task's sshd lets in root, as OpenPAI's containers do
    with jupyter(tmp_path / "jupyter", pai_home, {"profile": "remote"}) as js:
        assert "42MARK" in task_terminal(js, "root~web")

        upgrade = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        }
        http = js.http()

        def refused(job: str) -> tuple[int, dict[str, Any]]:
            r = http.get(task_url(job, "terminal/websocket"), headers=upgrade)
            return r.status_code, r.json()

        status, body = refused("root~nossh")
        assert status == 409 and "no ssh plugin" in body["message"]
        status, body = refused("root~down")
        assert status == 502 and body["code"] == "SshUnreachable" and "does not answer" in body["message"]
        status, body = refused("root~locked")
        assert status == 502 and body["code"] == "KeyRefused" and "refused the key" in body["message"]
        assert refused("root~missing")[0] == 404
        assert refused("mallory~web")[0] == 404  # another user's job is as absent as a missing one

        async def unauthenticated() -> int:
            try:
                await js.ws(task_url("root~web", "terminal/websocket"), token=None)
            except HTTPClientError as exc:
                return exc.code
            return 101

        assert asyncio.run(unauthenticated()) == 403
        r = httpx.get(js.url + task_url("root~web", "terminal/websocket"), headers=upgrade, timeout=30)
        assert r.status_code == 403
        assert json.dumps(sshds["key"].read_text()[:40]) not in js.log_text()  # the key is never logged


def test_ssh_info_and_pai_ssh_on_a_remote_profile(openpai: str, sshds: dict[str, Any], pai_home: Path) -> None:
    pai_home.mkdir(parents=True, exist_ok=True)
    (pai_home / "clusters.yaml").write_text(
        yaml.safe_dump({"clusters": [{"name": "remote", "url": openpai, "username": "root", "token": "t0ken"}]})
    )
    env = {**os.environ, "PAI_JUPYTER_HOME": str(pai_home)}

    def pai(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pai_jupyter.cli", args[0], "-p", "remote", *args[1:]]
        return subprocess.run(argv, env=env, text=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)

    r = pai("ssh-info", "web", "-k", str(sshds["key"]), "-o", "json")
    assert r.returncode == 0, r.stderr
    [info] = json.loads(r.stdout)
    assert (info["host"], info["port"], info["user"], info["key"]) == (
        "127.0.0.1",
        sshds["good"],
        "root",
        str(sshds["key"]),
    )
    r = pai("ssh", "web", "-k", str(sshds["key"]), "--", "echo", "$((6*7))")
    assert r.returncode == 0 and r.stdout.strip() == "42", r.stderr
    r = pai("ssh-info", "nossh")
    assert r.returncode != 0 and "has no ssh plugin" in r.stderr


def test_web_ssh_and_pai_ssh_refuse_a_changed_host_key(
    openpai: str, sshds: dict[str, Any], pai_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote OpenPAI reports no host key: the first one seen is kept per job, and when something else answers
    on the task's port later (another sshd, the same key let in) neither web SSH nor `pai ssh` log into it."""
    pytest.importorskip("asyncssh", reason="a dependency of pai_jupyter (pip install -e .)")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_bytes(sshds["key"].read_bytes())
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    pai_home.mkdir(parents=True, exist_ok=True)
    (pai_home / "clusters.yaml").write_text(
        yaml.safe_dump({"clusters": [{"name": "remote", "url": openpai, "username": "root", "token": "t0ken"}]})
    )
    env = {**os.environ, "PAI_JUPYTER_HOME": str(pai_home)}

    def pai_ssh() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pai_jupyter.cli", "ssh", "-p", "remote", "web", "--", "echo", "$((6*7))"]
        return subprocess.run(argv, env=env, text=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)

    upgrade = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    }
    with jupyter(tmp_path / "jupyter", pai_home, {"profile": "remote"}) as js:
        assert "42MARK" in task_terminal(js, "root~web")  # first use: the key is kept
        r = pai_ssh()  # the same file: OpenSSH reads what web SSH kept
        assert r.returncode == 0 and r.stdout.strip() == "42", r.stderr

        sshds["procs"]["good"].terminate()
        sshds["procs"]["good"].wait(10)
        sshds["procs"]["impostor"] = impostor(tmp_path / "sshd-impostor", sshds["pub"], sshds["good"])
        web = js.http().get(task_url("root~web", "terminal/websocket"), headers=upgrade)
        assert web.status_code == 502 and web.json()["code"] == "HostKeyChanged", web.text
        r = pai_ssh()
        assert r.returncode == 255 and "42" not in r.stdout
        assert "Host key verification failed" in r.stderr, r.stderr

    known = pai_home / "ssh" / "known_hosts" / "remote" / "root~web"  # the first key seen, and only that
    host_key = (tmp_path / "sshd-good" / "host.pub").read_text().split()[:2]
    assert known.read_text().split() == [f"[127.0.0.1]:{sshds['good']}", *host_key]
    assert str(known) in web.json()["message"]  # says where the key is kept
