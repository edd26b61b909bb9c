"""The PAI kernel through an SSH tunnel: a profile that is remote for the provisioner (as a real OpenPAI would
be) but is the real embedded daemon; the kernelspec says `tunnel: always`, so the kernel binds its task's
loopback and the Jupyter side reaches it only through the real sshd of the job's ssh plugin."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tornado.web

from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import free_port
from tests.helpers.kernel import (
    install_spec,
    interrupt_a_loop,
    job_processes,
    remote_profile,
    run_cell,
    run_notebook,
    running_kernel,
    start_kernel,
    stop_kernel,
)
from tests.helpers.ssh import keypair, need_sshd
from tests.helpers.standin import serving
from tests.polling import async_wait_for

pytestmark = pytest.mark.slow


def answers(port: int) -> bool:
    """Whether something accepts a TCP connection on 127.0.0.1:port."""
    with socket.socket() as s:
        s.settimeout(5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def ports(km: Any) -> list[int]:
    return [km.shell_port, km.iopub_port, km.stdin_port, km.control_port, km.hb_port]


@pytest.fixture
def tunnelled(
    daemon: Api, kernelspecs: Path, caplog: pytest.LogCaptureFixture
) -> Iterator[tuple[asyncio.AbstractEventLoop, Any, Any, str]]:
    """A started PAI kernel on a remote profile with `tunnel: always` (and its start's log); shut down at the end."""
    need_sshd()
    pytest.importorskip("asyncssh", reason="a dependency of pai_jupyter (pip install -e .)")
    install_spec(profile=remote_profile(daemon), tunnel="always")
    loop = asyncio.new_event_loop()
    with caplog.at_level(logging.INFO):
        km, kc = start_kernel(loop)
    try:
        yield loop, km, kc, caplog.text
    finally:
        stop_kernel(loop, km, kc)


def test_a_kernel_through_the_ssh_tunnel_lives_its_whole_life(
    tunnelled: Any, daemon: Api, caplog: pytest.LogCaptureFixture
) -> None:
    loop, km, kc, started = tunnelled
    prov = km.provisioner
    job = prov.job_id
    detail = daemon.detail(job)
    task = detail["taskRoles"]["kernel"]["taskStatuses"][0]
    ssh_port = int(str(task["containerPorts"]["ssh"]).split(",")[0])
    task_ports = [
        int(str(task["containerPorts"][label]).split(",")[0]) for label in ("shell", "iopub", "stdin", "control", "hb")
    ]
    # the path is said: in the provisioner's info and the server's log
    assert prov.path == f"SSH tunnel via 127.0.0.1:{ssh_port}"
    assert f"kernel reached through an SSH tunnel via 127.0.0.1:{ssh_port}" in started, started
    local = ports(km)
    assert km.ip == "127.0.0.1" and not set(local) & set(task_ports)  # Jupyter holds the tunnel's local ports
    config = daemon.http.get(f"/api/v2/jobs/{job}/config").text
    assert "plugin: ssh" in config  # the job got the ssh plugin the tunnel logs into

    _, text = loop.run_until_complete(run_cell(kc, "import os; print(os.environ['PAI_JOB_NAME'])"))
    assert text.strip() == job.split("~")[1]

    # an interrupt is a control-channel message, through the tunnel
    reply, _, text = loop.run_until_complete(interrupt_a_loop(km, kc))
    assert reply["ename"] == "KeyboardInterrupt" and text.strip() == "True 42", (reply, text)

    # restart with the job alive: same job, same tunnel, a fresh kernel
    tunnel = prov._tunnel
    loop.run_until_complete(km.restart_kernel())
    loop.run_until_complete(kc.wait_for_ready(timeout=120))
    assert prov.job_id == job and prov.incarnation == 1 and prov._tunnel is tunnel and ports(km) == local
    _, text = loop.run_until_complete(run_cell(kc, "print('n' in globals())"))
    assert text.strip() == "False"

    # the kernel dies: its job ends, the sshd with it; a restart submits a new job and re-opens the tunnel,
    # on the same local ports, so the connected client carries on
    kc.execute("import os; os._exit(3)")
    assert loop.run_until_complete(asyncio.wait_for(prov.wait(), 60)) == 3
    loop.run_until_complete(km.restart_kernel(now=True))
    new_job = prov.job_id
    assert new_job != job and prov._tunnel is not tunnel and prov.path.startswith("SSH tunnel via 127.0.0.1:")
    assert ports(km) == local
    loop.run_until_complete(kc.wait_for_ready(timeout=120))
    _, text = loop.run_until_complete(run_cell(kc, "import os; print(os.environ['PAI_JOB_NAME'])"))
    assert text.strip() == new_job.split("~")[1]

    # the SSH connection drops while the job runs: the next poll re-opens it on the same local ports
    dropped = prov._tunnel
    dropped.conn.close()

    async def reopened() -> bool:
        assert await prov.poll() is None  # the kernel is not dead
        return prov._tunnel is not None and prov._tunnel is not dropped and prov._tunnel.alive

    loop.run_until_complete(async_wait_for(reopened, 60, "the tunnel to be re-opened", interval=0.2))
    assert prov._tunnel.local_ports == dropped.local_ports and ports(km) == local
    # the client's ZMQ sockets reconnect through it on their own, iopub too: output published before iopub is
    # back is lost (as after any network drop), so wait as a client would, for a reply and iopub traffic
    loop.run_until_complete(kc.wait_for_ready(timeout=60))
    _, text = loop.run_until_complete(run_cell(kc, "print(6 * 7)"))
    assert text.strip() == "42"

    # shutdown: the job is stopped, nothing is left, and the tunnel's local ports stop answering
    assert all(answers(p) for p in local)
    with caplog.at_level(logging.INFO):
        loop.run_until_complete(km.shutdown_kernel())
    assert daemon.detail(new_job)["jobStatus"]["state"] == "STOPPED"
    assert not job_processes(new_job.split("~")[1])
    assert not any(answers(p) for p in local)
    assert "SSH tunnel via" in caplog.text and "closed" in caplog.text


def test_nbclient_runs_a_notebook_through_the_tunnel(
    daemon: Api, kernelspecs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    need_sshd()
    install_spec(profile=remote_profile(daemon), tunnel="always")
    with caplog.at_level(logging.INFO):
        [text] = run_notebook(["import os; print(os.environ['PAI_JOB_NAME'])"], tmp_path)
    name = text.strip()
    assert name.startswith(f"{tmp_path.name}-kernel-") or "-kernel-" in name
    assert "through an SSH tunnel via 127.0.0.1:" in caplog.text
    body = daemon.http.get("/api/v2/jobs").json()
    assert [j["state"] for j in (body["data"] if isinstance(body, dict) else body)] == ["STOPPED"]


def start_error(kernel_name: str = "pai-test") -> str:
    from jupyter_client.manager import AsyncKernelManager

    from pai_jupyter.kernel.provisioner import KernelStartError

    with pytest.raises(KernelStartError) as err:
        asyncio.run(AsyncKernelManager(kernel_name=kernel_name).start_kernel())
    return str(err.value)


def all_stopped(daemon: Api) -> bool:
    body = daemon.http.get("/api/v2/jobs").json()
    jobs = body["data"] if isinstance(body, dict) else body
    return bool(jobs) and all(j["state"] == "STOPPED" for j in jobs) and not any(job_processes(j["name"]) for j in jobs)


def test_a_job_without_the_ssh_plugin_is_a_clear_start_error(daemon: Api, kernelspecs: Path) -> None:
    from pai_jupyter.kernel.kernelspec import KernelSpecError

    need_sshd()
    with pytest.raises(KernelSpecError, match="needs the job's ssh plugin"):  # refused when installed
        install_spec(profile=remote_profile(daemon), tunnel="always", ssh_plugin=False)
    install_spec(profile=remote_profile(daemon), tunnel="always")  # then edited by hand
    spec = kernelspecs / "kernels" / "pai-test" / "kernel.json"
    doc = json.loads(spec.read_text())
    doc["metadata"]["kernel_provisioner"]["config"]["ssh_plugin"] = False
    spec.write_text(json.dumps(doc))
    message = start_error()
    assert "no SSH tunnel to the kernel" in message and "has no ssh plugin" in message, message
    assert "reinstall it with --ssh-plugin" in message
    assert "it was stopped" in message and all_stopped(daemon)


def test_a_refused_key_is_a_clear_start_error(daemon: Api, kernelspecs: Path, tmp_path: Path) -> None:
    need_sshd()
    key, _ = keypair(tmp_path, "id_stranger")
    key.with_suffix(".pub").unlink()  # so the job's userssh does not let it in
    install_spec(profile=remote_profile(daemon), tunnel="always", identity=str(key))
    message = start_error()
    assert "refused the key" in message and str(key) in message, message
    assert "it was stopped" in message and all_stopped(daemon)


class Rewriting(tornado.web.RequestHandler):
    """A stand-in for a cluster whose task addresses the Jupyter server cannot reach: relays every call to the
    daemon, but job details say each task is at 127.0.0.2 (the kernel binds 127.0.0.1 only, so its ports refuse
    there, while the task's sshd, which the daemon's ssh route names at 127.0.0.1, answers)."""

    SUPPORTED_METHODS = ("GET", "POST", "PUT", "DELETE")

    def initialize(self, upstream: str, ssh_port: list[int]) -> None:
        self.upstream, self.ssh_port = upstream, ssh_port

    async def _relay(self) -> None:
        headers = {k: v for k, v in self.request.headers.items() if k.lower() in ("authorization", "content-type")}
        async with httpx.AsyncClient(timeout=60) as http:
            r = await http.request(
                self.request.method,
                self.upstream + self.request.uri,
                headers=headers,
                content=self.request.body or None,
            )
        body = r.content
        if self.request.path.startswith("/api/v2/jobs/") and r.headers.get("content-type", "").startswith(
            "application/json"
        ):
            body = body.replace(b'"containerIp": "127.0.0.1"', b'"containerIp": "127.0.0.2"').replace(
                b'"containerIp":"127.0.0.1"', b'"containerIp":"127.0.0.2"'
            )
        if self.ssh_port and self.request.path.endswith("/ssh") and r.status_code == 200:
            doc = json.loads(body)  # the task's sshd said to be on a port where nothing answers
            for c in doc["containers"]:
                c["sshPort"] = self.ssh_port[0]
            body = json.dumps(doc).encode()
        self.set_status(r.status_code)
        if "content-type" in r.headers:
            self.set_header("Content-Type", r.headers["content-type"])
        self.finish(body)

    get = post = put = delete = _relay


@pytest.fixture
def ssh_port() -> list[int]:
    """Set to a port to make the stand-in say the task's sshd is there."""
    return []


@pytest.fixture
def unreachable_profile(daemon: Api, ssh_port: list[int]) -> Iterator[str]:
    """A remote profile through the rewriting stand-in."""
    from pai_jupyter.client.profiles import Profile, upsert_profile

    app = tornado.web.Application([(r"/.*", Rewriting, {"upstream": daemon.url.rstrip("/"), "ssh_port": ssh_port})])
    with serving(app) as url:
        user = daemon.http.get("/api/v2/info").json()["user"]
        upsert_profile(Profile(name="walled", url=url, username=user, token=daemon.token))
        yield "walled"


def test_auto_tunnels_when_the_tasks_ports_do_not_answer_directly(
    daemon: Api, kernelspecs: Path, unreachable_profile: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:

    need_sshd()
    loopback_only = tmp_path / "python-on-loopback"  # the kernel binds its task's loopback only
    loopback_only.write_text(f'#!/bin/sh\nPAI_KERNEL_IP=127.0.0.1 exec {sys.executable} "$@"\n')
    loopback_only.chmod(0o755)
    install_spec(profile=unreachable_profile, python=str(loopback_only))  # tunnel: auto, the default
    spec = kernelspecs / "kernels" / "pai-test" / "kernel.json"
    doc = json.loads(spec.read_text())
    doc["metadata"]["kernel_provisioner"]["config"]["direct_timeout"] = 3
    spec.write_text(json.dumps(doc))

    async def scenario() -> tuple[str, str, str]:
        async with running_kernel() as (km, kc):
            _, text = await run_cell(kc, "import os; print(os.environ['PAI_JOB_NAME'])")
            return km.provisioner.path, km.provisioner.job_id, text.strip()

    with caplog.at_level(logging.INFO):
        path, job, name = asyncio.run(scenario())
    assert path.startswith("SSH tunnel via 127.0.0.1:"), path
    assert name == job.split("~")[1]
    assert "kernel reached through an SSH tunnel via 127.0.0.1:" in caplog.text
    assert daemon.detail(job)["jobStatus"]["state"] == "STOPPED"


def test_an_sshd_that_does_not_answer_is_a_clear_start_error(
    daemon: Api, kernelspecs: Path, unreachable_profile: str, ssh_port: list[int]
) -> None:
    need_sshd()
    ssh_port.append(free_port())  # nothing listens there
    install_spec(profile=unreachable_profile, tunnel="always", start_timeout=5)
    message = start_error()
    assert f"the kernel task's sshd at 127.0.0.1:{ssh_port[0]} does not answer" in message, message
    assert "it was stopped" in message and all_stopped(daemon)


def impostor(seen: list[str]) -> Any:
    """An sshd class with no host key of the job's that lets any key in and forwards anything: a stranger listening
    where the cluster says the job's sshd is. What reached it is recorded in ``seen``."""
    import asyncssh

    class Impostor(asyncssh.SSHServer):  # type: ignore[misc]
        def begin_auth(self, username: str) -> bool:
            return True

        def public_key_auth_supported(self) -> bool:
            return True

        def validate_public_key(self, username: str, key: Any) -> bool:
            seen.append(f"login as {username}")
            return True

        def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
            seen.append(f"forward to {dest_host}:{dest_port}")
            return True

    return Impostor


def test_a_changed_host_key_is_refused(
    daemon: Api,
    kernelspecs: Path,
    unreachable_profile: str,
    ssh_port: list[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Trust on first use, per job: the tunnel re-opened after a drop meets another host key where the cluster
    says the job's sshd is (a stranger's sshd) and refuses it before logging in or forwarding anything."""
    need_sshd()
    asyncssh = pytest.importorskip("asyncssh", reason="a dependency of pai_jupyter (pip install -e .)")
    install_spec(profile=unreachable_profile, tunnel="always")
    loop = asyncio.new_event_loop()
    km, kc = start_kernel(loop)  # the first use: the job's own sshd
    seen: list[str] = []
    stranger = loop.run_until_complete(
        asyncssh.create_server(
            impostor(seen),
            "127.0.0.1",
            0,
            server_host_keys=[asyncssh.generate_private_key("ssh-ed25519")],
        )
    )
    try:
        prov = km.provisioner
        ssh_port.append(stranger.sockets[0].getsockname()[1])  # from now on the cluster says the sshd is there
        prov._tunnel.conn.close()  # the connection drops: the next poll re-opens it

        async def refused() -> bool:
            prov._checked = (0.0, None)
            await prov.poll()
            return bool(seen) or "presented a host key other than" in caplog.text

        with caplog.at_level(logging.WARNING):
            loop.run_until_complete(async_wait_for(refused, 60, "the re-opened tunnel to be refused", interval=0.2))
        assert seen == [], seen  # no login, no forward: nothing reached the stranger
        assert "presented a host key other than" in caplog.text
        assert prov._tunnel is None or not prov._tunnel.alive
        assert "trust on first use" in caplog.text and prov.job_id in caplog.text
    finally:
        stranger.close()
        stop_kernel(loop, km, kc)
