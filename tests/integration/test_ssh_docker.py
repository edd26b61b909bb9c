"""The ssh plugin on the Docker runtime: the image's sshd (an image built from the host's OpenSSH binaries by
tests/make_sshd_image.sh), and a clear message when the image has none."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pai_jupyter.client import Client
from tests.helpers.daemon import Api
from tests.helpers.ssh import need_sshd, ssh
from tests.polling import wait_for

IMAGE = "pai-test/sshd:latest"
pytestmark = pytest.mark.docker


def _image() -> None:
    need_sshd()
    script = Path(__file__).parents[1] / "make_sshd_image.sh"
    r = subprocess.run(["bash", str(script), IMAGE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def _job(name: str, image: str, main: str, worker: str | None = None) -> str:
    roles = [{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": main}]
    if worker:
        roles.append(
            {
                "name": "worker",
                "taskNumber": 1,
                "cpuNumber": 1,
                "memoryMB": 256,
                "gpuNumber": 0,
                "command": worker,
                "minSucceededTaskCount": 1,
            }
        )
    return json.dumps(
        {
            "jobName": name,
            "image": image,
            "taskRoles": roles,
            "extras": {
                "com.microsoft.pai.runtimeplugin": [
                    {"plugin": "ssh", "parameters": {"jobssh": True, "sshbarrier": True}}
                ]
            },
        }
    )


def test_docker_tasks_run_the_images_sshd(docker_daemon: Api) -> None:
    _image()
    pai = Client()
    # the worker's success ends the job (and main's sshd): it waits for this test's logins first
    worker = "ssh main-0 'until [ -e /tmp/checked ]; do sleep 0.2; done; echo in $PAI_TASK_ROLE_NAME'"
    job = pai.submit(_job("dssh", IMAGE, "echo main up; sleep 300", worker=worker))
    pai.wait(job, until={"RUNNING"}, timeout=120)
    [info] = _info(pai, job)
    assert info.user == "root"
    command = 'echo "index=$PAI_TASK_INDEX dir=$PAI_TASK_DIR"; pwd'
    tries: list[str] = []

    def answered() -> subprocess.CompletedProcess[str] | None:  # a connection the starting sshd closed: again
        r = ssh(Path(info.key), info.port, command)
        tries.append(r.stderr.strip())
        return r if r.returncode == 0 else None

    r = wait_for(answered, 60, lambda: f"the container's sshd to run the command: {tries[-3:]}")
    assert r.stdout.splitlines()[0] == "index=0 dir=/pai/task"
    # a login with a terminal (pai ssh, web SSH): sshd writes its audit record (AUDIT_WRITE) or ends the session
    r = ssh(Path(info.key), info.port, "tty && touch /tmp/checked", pty=True)
    assert r.returncode == 0 and "/dev/pts/" in r.stdout, r.stderr
    out = pai.wait(job, timeout=120)
    worker_log = pai.logs(job, role="worker", stream="all")
    assert "in main" in worker_log and out.state == "SUCCEEDED", worker_log


def _info(pai: Client, job: str) -> list:
    from pai_jupyter.client.ssh import ssh_info

    return ssh_info(pai, job, role="main")


def test_an_image_without_sshd_says_so(docker_daemon: Api) -> None:
    pai = Client()
    job = pai.submit(_job("nosshd", "pai-test/busybox:latest", "echo still runs; sleep 300"))
    pai.wait(job, until={"RUNNING"}, timeout=120)
    svc = wait_for(
        lambda: next((s for s in pai.services(job) if s.state == "unavailable"), None),
        60,
        "the ssh service to say it cannot start",
    )
    assert "openssh-server" in str(svc.message)
    wait_for(lambda: "still runs" in pai.logs(job, stream="all"), 30, "the command")
    assert "[pai ssh plugin] no sshd in this task" in pai.logs(job, stream="all")
    [info] = _info(pai, job)
    assert "openssh-server" in info.problem
    pai.stop(job)
