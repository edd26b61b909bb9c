"""`pai ssh-key`, `pai ssh-info`, `pai ssh` and the REST routes behind them, with a real sshd and ssh client."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx

from tests.helpers.daemon import Api
from tests.helpers.ssh import impostor, keypair, need_sshd, ssh
from tests.polling import wait_for

PAI = [sys.executable, "-m", "pai_jupyter.cli"]


def pai(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAI_JUPYTER_HOME": str(home)}
    env.pop("PAI_PROFILE", None)
    return subprocess.run([*PAI, *args], capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)


def _job(name: str) -> str:
    return json.dumps(
        {
            "jobName": name,
            "image": "pai-test/busybox:latest",
            "extras": {"com.microsoft.pai.runtimeplugin": [{"plugin": "ssh"}]},
            "taskRoles": [
                {
                    "name": "main",
                    "taskNumber": 1,
                    "cpuNumber": 1,
                    "memoryMB": 256,
                    "gpuNumber": 0,
                    "command": "sleep 300",
                }
            ],
        }
    )


def test_stored_key_job_key_and_ssh_info(daemon: Api, tmp_path: Path) -> None:
    need_sshd()
    key, pub = keypair(tmp_path)
    (tmp_path / "id_test.pub").write_text(pub + "\n")
    r = pai("ssh-key", "add", "laptop", str(tmp_path / "id_test.pub"), home=daemon.home)
    assert r.returncode == 0, r.stderr
    r = pai("ssh-key", "add", "bad", "not a key", home=daemon.home)
    assert r.returncode == 2 and "public key must be one line" in r.stderr
    listed = json.loads(pai("ssh-key", "list", "-o", "json", home=daemon.home).stdout)
    assert [(k["title"], k["value"]) for k in listed] == [("laptop", pub)]

    job = daemon.submit_ok(_job("sshcli"))
    daemon.wait(job, ("RUNNING",))
    r = pai("ssh-info", job, "-o", "json", home=daemon.home)
    assert r.returncode == 0, r.stderr
    [info] = json.loads(r.stdout)
    assert info["role"] == "main" and info["index"] == 0 and info["port"]
    key_file = Path(info["key"])
    assert key_file == daemon.home / "ssh" / f"{job}.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert f"-p {info['port']}" in info["ssh"] and f"-P {info['port']}" in info["scp"]
    assert f"Port {info['port']}" in info["config"] and f"IdentityFile {key_file}" in info["config"]
    text = pai("ssh-info", job, home=daemon.home).stdout
    assert "~/.ssh/config" in text and info["ssh"] in text

    wait_for(lambda: ssh(key, info["port"], "true", user=info["user"]).returncode == 0, 60, "sshd")
    r = ssh(key, info["port"], "echo stored key works", user=info["user"])  # the user's stored key
    assert r.stdout.strip() == "stored key works", r.stderr
    r = ssh(key_file, info["port"], "echo job key works", user=info["user"])  # the downloaded job key
    assert r.stdout.strip() == "job key works", r.stderr
    r = pai("ssh", job, "--", "echo", "via pai ssh", home=daemon.home)
    assert r.returncode == 0 and r.stdout.strip() == "via pai ssh", r.stderr

    from pai_jupyter.client import Client
    from pai_jupyter.notebook.joblist import JobList

    key_file.unlink()
    jl = JobList(Client(), interval=0)
    jl.act("SSH", job)  # the widget's row action: the commands, and the key saved again (0600)
    shown = jl.panel.children[0].value
    assert f"-p {info['port']}" in shown and "~/.ssh/config" in shown and str(key_file) in shown
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    jl.close()

    r = pai("ssh-key", "remove", "laptop", home=daemon.home)
    assert r.returncode == 0 and json.loads(pai("ssh-key", "list", "-o", "json", home=daemon.home).stdout) == []
    assert pai("ssh-key", "remove", "laptop", home=daemon.home).returncode != 0
    daemon.stop(job)


def test_pai_ssh_pins_the_host_key_the_task_reported(daemon: Api, tmp_path: Path) -> None:
    """The daemon reports each task's host key; `pai ssh` accepts no other on that port (another local process
    that takes the port once the task's sshd is gone, letting the same key in, is refused)."""
    need_sshd()
    from pai_jupyter.client import Client

    job = daemon.submit_ok(_job("sshpin"))
    daemon.wait(job, ("RUNNING",))
    pai_client = Client()
    wait_for(
        lambda: [s for s in pai_client.services(job) if s.name == "ssh" and s.state == "running"],
        60,
        "the task's sshd",
    )
    r = pai("ssh", job, "--", "echo", "pinned", home=daemon.home)
    assert r.returncode == 0 and r.stdout.strip() == "pinned", r.stderr
    [info] = json.loads(pai("ssh-info", job, "-o", "json", home=daemon.home).stdout)

    pai_client.service_action(job, "main", 0, "ssh", "stop")
    public = daemon.http.get(f"/api/v2/local/jobs/{job}/ssh").json()["keyPair"]["publicKey"]
    fake = impostor(tmp_path / "impostor", public, info["port"])
    try:
        r = pai("ssh", job, "--", "echo", "reached the impostor", home=daemon.home)
        assert r.returncode == 255 and "impostor" not in r.stdout
        assert "Host key verification failed" in r.stderr, r.stderr
    finally:
        fake.terminate()
        fake.wait(10)
    [container] = daemon.http.get(f"/api/v2/local/jobs/{job}/ssh").json()["containers"]
    assert info["host_key"] == container["hostKey"] and not info["trust_first"]
    known = Path(info["known_hosts"]).read_text().split()
    assert known == [f"[127.0.0.1]:{info['port']}", *container["hostKey"].split()[:2]]
    daemon.stop(job)


def test_routes_refuse_strangers_and_other_users(daemon: Api) -> None:
    job = daemon.submit_ok(_job("sshauth"))
    daemon.wait(job, ("RUNNING",))
    base = f"/api/v2/local/jobs/{job}/ssh"
    assert daemon.http.get(base + "/key").status_code == 200  # the owner
    anon = httpx.Client(base_url=daemon.url, timeout=30)
    for method, path in (
        ("GET", base),
        ("GET", base + "/key"),
        ("GET", "/api/v2/local/ssh-keys"),
        ("POST", "/api/v2/local/ssh-keys"),
        ("DELETE", "/api/v2/local/ssh-keys/x"),
    ):
        assert anon.request(method, path).status_code == 401, (method, path)
    mallory = daemon.new_user("mallory")
    assert mallory.http.get(base).status_code == 404
    assert mallory.http.get(base + "/key").status_code == 404
    assert mallory.http.get("/api/v2/local/ssh-keys").json() == []  # only one's own keys
    boss = daemon.new_user("boss", admin=True)
    assert boss.http.get(base).status_code == 200  # an admin sees the job...
    assert boss.http.get(base + "/key").status_code == 404  # ...but never its owner's private key
    nossh = daemon.submit_ok(
        json.dumps(
            {
                "jobName": "plain",
                "image": "x",
                "taskRoles": [
                    {
                        "name": "main",
                        "taskNumber": 1,
                        "cpuNumber": 1,
                        "memoryMB": 128,
                        "gpuNumber": 0,
                        "command": "true",
                    }
                ],
            }
        )
    )
    r = daemon.http.get(f"/api/v2/local/jobs/{nossh}/ssh")
    assert r.status_code == 404 and "no ssh plugin" in r.json()["message"]
    daemon.stop(job)
