"""On the Slurm backend, as on the process runtime, a user's tasks run as that user's own OS account on the nodes
(Slurm's own uid handling: sbatch --uid/--gid as root), so no task can read the daemon's token or another user's
files; the admin's own tasks run as the daemon's account. A task's terminal is a shell on its node, in its Slurm
job, as its account."""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from tests.helpers.daemon import Api, account_of
from tests.helpers.slurm_jobs import job, role
from tests.helpers.terminal import Terminal

from ..polling import wait_for

pytestmark = [pytest.mark.slurm]
PROBE = (
    'echo "uid=$(id -u) on $SLURMD_NODENAME"; L="$PAI_USER_HOME/../../.."; '
    'cat "$L/runtime.json" 2>/dev/null || echo DENIED-runtime; '
    'echo mine > "$PAI_USER_HOME/note" && echo HOME-OK'
)


@pytest.mark.skipif(os.geteuid() != 0, reason="own accounts need a daemon run as root")
def test_a_users_tasks_run_as_their_own_account_on_the_nodes(slurm: Api) -> None:
    r = slurm.http.post("/api/v2/local/users", json={"name": "slurmbob"})
    assert r.status_code == 201, r.text
    bob = slurm.as_user(r.json()["token"])
    try:
        name = bob.submit_ok(job("mine", {"main": role(PROBE, instances=2)}))
        detail = bob.wait(name, timeout=60)
        account = account_of(slurm.home, "slurmbob")
        for index in (0, 1):
            out = bob.log(name, index=index, name="stdout")
            assert detail["jobStatus"]["state"] == "SUCCEEDED", (detail, out)
            assert f"uid={account.pw_uid} on n" in out and account.pw_uid != 0, out
            assert "DENIED-runtime" in out and slurm.token not in out and "HOME-OK" in out, out
        own = slurm.submit_ok(job("admins", {"main": role("echo uid=$(id -u)")}))
        assert slurm.wait(own, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
        assert slurm.log(own, name="stdout") == f"uid={os.geteuid()}\n"
    finally:
        slurm.http.delete("/api/v2/local/users/slurmbob")


@pytest.mark.skipif(os.geteuid() != 0, reason="own accounts need a daemon run as root")
def test_a_tasks_terminal_is_a_shell_on_its_node_as_its_account(slurm: Api) -> None:
    bob = slurm.new_user("slurmterm")
    try:
        name = bob.submit_ok(job("term", {"main": role("sleep 300")}))
        task = wait_for(lambda: (t := bob.tasks(bob.detail(name))[0])["taskState"] == "RUNNING" and t, 60)

        async def look() -> re.Match[str]:
            term = await Terminal.open(bob, name)
            try:
                return await term.run("echo NODE=$SLURMD_NODENAME UID=$(id -u) JOB=$SLURM_JOB_ID END", PATTERN)
            finally:
                term.close()

        found = asyncio.run(look())
        assert found[1] == task["containerNodeName"] and found[3] == task["containerId"], found.group(0)
        assert int(found[2]) == account_of(slurm.home, "slurmterm").pw_uid
        bob.stop(name)
        assert bob.wait(name, timeout=60)["jobStatus"]["state"] == "STOPPED"
    finally:
        slurm.http.delete("/api/v2/local/users/slurmterm")


PATTERN = r"NODE=(n\d) UID=(\d+) JOB=(\d+) END"
