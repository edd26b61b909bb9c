"""The ssh plugin's planning and key checks (the sshd itself is tested in tests/integration/test_ssh_*.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from pai_jupyter.cluster.task import jobkey, services, sshd
from pai_jupyter.protocol import Job
from tests.helpers.jobdocs import v2_doc, v2_role

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


def test_the_job_key_is_the_daemons_and_readable_by_the_tasks_group_only(tmp_path: Path) -> None:
    job_dir = tmp_path / "alice~j"
    public = jobkey.ensure(job_dir, "pai-job alice~j", None)  # the tasks run as the daemon's account
    assert sshd.check_public_key(public) == public and public.endswith("pai-job alice~j")
    d = jobkey.key_dir(job_dir)
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / jobkey.JOB_KEY).stat().st_mode) == 0o600
    private = jobkey.read(job_dir)
    assert private is not None and b"PRIVATE KEY" in private
    group = os.getgid()  # the tasks run as an account of their own: its group reads, nobody else
    assert jobkey.ensure(job_dir, "ignored: made already", group) == public
    assert stat.S_IMODE(d.stat().st_mode) == 0o750 and d.stat().st_gid == group
    for name in (jobkey.JOB_KEY, jobkey.PUBLIC):
        st = (d / name).stat()
        assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o640, group)
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(d / jobkey.PUBLIC)], capture_output=True, text=True)
    assert jobkey.fingerprint(public) == out.stdout.split()[1]


def test_a_planted_key_dir_or_key_file_is_neither_read_nor_written(tmp_path: Path) -> None:
    """What a task could put in the key's place (its job dir was its own): a link to root's ~/.ssh, a hard link."""
    roots = tmp_path / "root-ssh"
    roots.mkdir()
    (roots / jobkey.JOB_KEY).write_text("ROOT'S KEY")
    (roots / jobkey.PUBLIC).write_text(KEY)
    job_dir = tmp_path / "bob~j"
    job_dir.mkdir()
    jobkey.key_dir(job_dir).symlink_to(roots)
    assert jobkey.read(job_dir) is None and jobkey.read(job_dir, jobkey.PUBLIC) is None
    with pytest.raises(jobkey.JobKeyError):
        jobkey.ensure(job_dir, "c", None)
    assert sorted(p.name for p in roots.iterdir()) == [jobkey.JOB_KEY, jobkey.PUBLIC]  # nothing written there

    other = tmp_path / "carol~j"
    jobkey.ensure(other, "c", None)
    key = jobkey.key_dir(other) / jobkey.JOB_KEY
    key.unlink()
    os.link(roots / jobkey.JOB_KEY, key)  # a second name of a file of root's
    assert jobkey.read(other) is None
    with pytest.raises(jobkey.JobKeyError):
        jobkey.ensure(other, "c", None)


def test_files_a_task_writes_are_read_without_following_links(tmp_path: Path) -> None:
    task_dir = tmp_path / "a0.main-0.t0"
    ssh_dir = task_dir / sshd.TASK_SSH
    ssh_dir.mkdir(parents=True)
    host_pub = ssh_dir / f"{sshd.HOST_KEY}.pub"
    assert sshd.reported_host_key(task_dir) is None  # not made yet
    host_pub.write_text(KEY + "\n")
    assert sshd.reported_host_key(task_dir) == KEY
    host_pub.write_text("not a key\n")
    assert sshd.reported_host_key(task_dir) is None
    roots = tmp_path / "root.pub"
    roots.write_text(KEY)
    host_pub.unlink()
    host_pub.symlink_to(roots)
    assert sshd.reported_host_key(task_dir) is None

    home = tmp_path / "users" / "bob" / "home"
    home.mkdir(parents=True)
    sshd.save_user_keys(home, [{"title": "t", "value": KEY}])
    assert [k["value"] for k in sshd.load_user_keys(home)] == [KEY]
    planted = tmp_path / "roots.json"
    planted.write_text('[{"title": "x", "value": "ROOT"}]')
    sshd.user_keys_file(home).unlink()
    sshd.user_keys_file(home).symlink_to(planted)
    assert sshd.load_user_keys(home) == []
    sshd.user_keys_file(home).unlink()
    os.mkfifo(sshd.user_keys_file(home))  # would block a plain read forever
    assert sshd.load_user_keys(home) == []


def test_the_task_runs_its_sshd_from_its_run_dir() -> None:
    info = {"port": 2222, "parameters": {}, "authorizedKeys": [KEY], "jobKey": None}
    for script in (sshd.prelude(info), sshd.command(info)):
        assert f'pai_ssh="$PAI_TASK_DIR/{sshd.TASK_SSH}"' in script
        assert '"$PAI_TASK_DIR/ssh"' not in script
