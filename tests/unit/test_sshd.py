"""The ssh plugin's planning and key checks (the sshd itself is tested in tests/integration/test_ssh_*.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from pai_jupyter.cluster.task import services, sshd
from pai_jupyter.protocol import Job

from .jobdocs import v2_doc, v2_role

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ3mZJ0hFVsFd1O3y0m3C2bqZQ9nq3lBqD5o4m0vTq9c me@laptop"


def _job(plugins: list[dict], **extras: object) -> Job:
    roles = {r: v2_role(instances=n) for r, n in (("main", 1), ("worker", 2))}
    doc = v2_doc(roles, extras={"com.microsoft.pai.runtimeplugin": plugins, **extras})
    return Job.from_text(yaml.safe_dump(doc))


def test_every_task_runs_sshd_and_jobssh_needs_gang_allocation() -> None:
    plan = services.planned(_job([{"plugin": "ssh", "parameters": {"jobssh": True}}, {"plugin": "jupyter"}]))
    assert sorted(plan) == [("main", 0), ("worker", 0), ("worker", 1)]
    assert plan[("main", 0)]["ssh"]["jobssh"] is True and "jupyter" in plan[("main", 0)]
    loose = sshd.planned(_job([{"plugin": "ssh", "parameters": {"jobssh": True}}], gangAllocation=False))
    assert all(p["ssh"]["jobssh"] is False for p in loose.values())
    assert sshd.planned(_job([{"plugin": "jupyter"}])) == {}


def test_public_keys_are_one_line_of_a_known_type() -> None:
    assert sshd.check_public_key(f"  {KEY}\n") == KEY
    for bad in ("", "hello", KEY + "\nssh-rsa AAAA x", 'command="rm -rf /" ' + KEY, "ssh-ed25519 not*base64"):
        with pytest.raises(sshd.KeyError_):
            sshd.check_public_key(bad)


def test_the_prelude_refuses_a_smuggled_key_and_the_barrier_needs_jobssh() -> None:
    info = {"port": 2222, "parameters": {"sshbarrier": True}, "authorizedKeys": [KEY], "jobKey": None}
    assert "authorized_keys" in sshd.prelude(info)
    assert sshd.barrier(info) == ""  # no jobssh: nothing to wait for
    assert "exit 249" in sshd.barrier({**info, "jobKey": "/k"})
    with pytest.raises(sshd.KeyError_):
        sshd.prelude({**info, "authorizedKeys": [KEY + "\nPAI_EOF"]})


def test_the_barrier_waits_for_every_other_task_then_gives_up_with_249(tmp_path: Path) -> None:
    (tmp_path / "ssh").write_text('#!/bin/sh\necho "$@" >>"$(dirname "$0")/tried"; exit 255\n')  # nobody answers
    (tmp_path / "ssh").chmod(0o755)
    script = sshd.barrier({"parameters": {"sshbarrier": True, "sshbarrierTimeout": 0.05}, "jobKey": "/k"})
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "PAI_CURRENT_TASK_ROLE_NAME": "worker",
        "PAI_TASK_ROLE_INSTANCES": "main:0,worker:0,worker:1",
        "PAI_TASK_INDEX": "0",
    }
    r = subprocess.run(
        ["sh", "-c", script + "\necho command runs"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 249 and "command runs" not in r.stdout
    assert "timed out after 0.05 min; no ssh to: main-0 worker-1" in r.stderr
    tried = (tmp_path / "tried").read_text()
    assert "main-0 true" in tried and "worker-1 true" in tried and "worker-0" not in tried


def test_bad_ssh_parameters_are_refused_at_submission() -> None:
    from pai_jupyter.protocol import JobValidationError

    with pytest.raises(JobValidationError) as err:
        _job(
            [
                {
                    "plugin": "ssh",
                    "parameters": {
                        "jobssh": "yes",
                        "sshbarrierTimeout": -1,
                        "userssh": {"type": "custom", "value": "not a key"},
                    },
                }
            ]
        )
    paths = {p.path for p in err.value.problems}
    assert {
        "extras.com.microsoft.pai.runtimeplugin[0].parameters.jobssh",
        "extras.com.microsoft.pai.runtimeplugin[0].parameters.sshbarrierTimeout",
        "extras.com.microsoft.pai.runtimeplugin[0].parameters.userssh.value",
    } <= paths, paths
    ok = _job([{"plugin": "ssh", "parameters": {"jobssh": "true", "userssh": {"type": "custom", "value": KEY}}}])
    assert all(p["ssh"]["jobssh"] is True for p in sshd.planned(ok).values())  # OpenPAI reads "true" too
