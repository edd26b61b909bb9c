"""The ssh runtime plugin on the process runtime: a real sshd per task, a real ssh / scp client."""

from __future__ import annotations

import getpass
from pathlib import Path

from pai_jupyter.client import Client
from pai_jupyter.common.states import FINAL
from tests.helpers.daemon import Api
from tests.helpers.ssh import keypair, need_sshd, plugin_job, scp, ssh
from tests.polling import wait_for


def _ssh_port(pai: Client, job: str, role: str = "main", index: int = 0) -> int:
    def up() -> int | None:
        for s in pai.services(job):
            if (s.name, s.role, s.index, s.state) == ("ssh", role, index, "running"):
                return s.port
        return None

    return wait_for(up, 60, "the task's sshd")


def test_login_lands_in_the_task_with_its_env_and_scp_copies_in(daemon: Api, tmp_path: Path) -> None:
    need_sshd()
    key, pub = keypair(tmp_path)
    wrong, _ = keypair(tmp_path, "id_wrong")
    pai = Client()
    job = pai.submit(
        plugin_job("sshin", "echo command ran at once; sleep 300", {"userssh": {"type": "custom", "value": pub}})
    )
    pai.wait(job, until={"RUNNING"})
    wait_for(lambda: "command ran at once" in pai.logs(job, stream="stdout"), 20, "the user's command")
    port = _ssh_port(pai, job)
    assert int(pai.detail(job).tasks[0].container_ports["ssh"]) == port
    me = getpass.getuser()
    r = ssh(key, port, 'echo "index=$PAI_TASK_INDEX port=$PAI_CONTAINER_SSH_PORT job=$PAI_JOB_NAME"; pwd', user=me)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"index=0 port={port} job=sshin"
    assert lines[1].endswith("/work") and "sshin" in lines[1]  # the task's working dir
    src = tmp_path / "data.txt"
    src.write_text("copied by scp\n")
    r = scp(key, port, src, "data.txt", user=me)
    assert r.returncode == 0, r.stderr
    assert (Path(lines[1]) / "data.txt").read_text() == "copied by scp\n"
    r = ssh(wrong, port, "echo should not run", user=me)
    assert r.returncode == 255 and "should not run" not in r.stdout
    assert "Permission denied" in r.stderr
    pai.stop(job)


def test_jobssh_tasks_reach_each_other_by_name_after_the_barrier(daemon: Api) -> None:
    need_sshd()
    pai = Client()
    job = pai.submit(
        plugin_job(
            "mpi",
            "sleep 300",
            {"jobssh": True, "sshbarrier": True, "sshbarrierTimeout": 2},
            worker="ssh main-0 'echo from main: $PAI_CURRENT_TASK_ROLE_NAME-$PAI_TASK_INDEX'",
        )
    )
    detail = pai.wait(job, until=FINAL, timeout=150)
    out = pai.logs(job, role="worker", stream="all")
    assert "pai ssh barrier: every task answers" in out, out
    assert "from main: main-0" in out, out
    assert detail.state == "SUCCEEDED", out
