"""The web terminal of a process-runtime task is a shell INSIDE the task: the task's C shim starts
it, so it runs as the task's account, in the task's cgroups and below the shim, and ends with the task. The audit's
attacks, each through the daemon's terminal websocket: a memory hog in a 256 MB task, a ``setsid sleep`` that
outlived its job, and a job's own environment (LD_PRELOAD) acting on the root daemon's way into the task."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from pai_jupyter.cluster import control
from pai_jupyter.cluster.runtime.cgroups import CgroupManager
from pai_jupyter.cluster.runtime.shim import build_c_shim
from tests.helpers.daemon import Api, account_of, kill_leftovers, reachable, start_daemon, v1
from tests.helpers.jobdocs import v2_doc, v2_role
from tests.helpers.terminal import Terminal
from tests.polling import wait_for

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="isolation by OS accounts needs a daemon run as root")
CGROUPS = CgroupManager().available


@pytest.fixture(autouse=True)
def _c_shim() -> None:
    try:
        build_c_shim()
    except RuntimeError as exc:  # .ci/run installs gcc; without one a task's terminal is the daemon's shell
        pytest.skip(f"the C shim cannot be built here: {exc}")


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[Api]:
    home = tmp_path / "pai-home"
    api = start_daemon(home)
    yield api
    control.stop(home)
    kill_leftovers(home)


def _running(api: Api, command: str, memory_mb: int = 256) -> str:
    job = api.submit_ok(v1(f"term{time.time_ns() % 10**9}", command, memoryMB=memory_mb))
    api.wait(job, {"RUNNING"})
    return job


def _inside(api: Api, user: str | None) -> None:
    """The terminal's shell has the task's parent (its shim), cgroups and account (``user``'s; None: the daemon's).
    The account is looked up once the task runs: the daemon makes a user's account for their first task."""
    job = _running(api, "echo SHIM=$PPID; echo CG=$(cat /proc/self/cgroup | tr '\\n' ' ')END; sleep 300")
    account_uid = os.geteuid() if user is None else account_of(api.home, user).pw_uid
    task = wait_for(lambda: re.search(r"SHIM=(\d+)\nCG=(.*)END", api.log(job, name="stdout")), 20, "the task's own")

    async def look() -> tuple[str, str, str]:
        term = await Terminal.open(api, job)
        try:
            uid = (await term.run("echo UID=$(id -u)END", r"UID=(\d+)END"))[1]
            parent = (await term.run("echo PARENT=${PPID}END", r"PARENT=(\d+)END"))[1]
            cgroups = (await term.run("echo CG=$(cat /proc/self/cgroup | tr '\\n' ' ')END", r"CG=(\d.*)END"))[1]
            return uid, parent, cgroups
        finally:
            term.close()

    uid, parent, cgroups = asyncio.run(look())
    assert int(uid) == account_uid
    assert parent == task[1]  # a child of the task's shim, not of the daemon
    assert cgroups == task[2]  # in the task's memory (cpu, pids) cgroups, not the daemon's
    api.stop(job)


def test_the_terminal_of_the_daemons_own_task_runs_inside_it(admin: Api) -> None:
    _inside(admin, None)


@root_only
def test_the_terminal_of_a_users_task_runs_inside_it_as_the_users_account(admin: Api) -> None:
    bob = admin.new_user("termbob")
    _inside(bob, "termbob")


def test_what_the_terminal_started_ends_with_the_task(admin: Api) -> None:
    job = _running(admin, "sleep 300")

    async def start() -> int:
        term = await Terminal.open(admin, job)
        try:
            line = "setsid sh -c 'echo SLEEPER=$$END; exec sleep 1000' </dev/null &"
            return int((await term.run(line, r"SLEEPER=(\d+)END"))[1])
        finally:
            term.close()

    sleeper = asyncio.run(start())
    assert psutil.Process(sleeper).cmdline() == ["sleep", "1000"]  # it outlives its terminal, as nohup would
    control.stop(admin.home)  # and the daemon: the task's shim holds the shell, not the daemon
    admin = start_daemon(admin.home)
    assert psutil.Process(sleeper).cmdline() == ["sleep", "1000"]

    async def again() -> None:  # a restarted daemon opens a terminal in the task it re-attached to
        term = await Terminal.open(admin, job)
        try:
            await term.run("echo AGAIN=$((1+1))END", r"AGAIN=2END")
        finally:
            term.close()

    asyncio.run(again())
    admin.stop(job)
    admin.wait(job)

    def ended() -> bool:
        try:
            return psutil.Process(sleeper).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_for(ended, 10, f"the terminal's setsid sleep {sleeper} to end with its job")


@pytest.mark.skipif(not CGROUPS, reason="no writable memory cgroup on this machine")
def test_a_memory_hog_in_the_terminal_is_held_to_the_tasks_limit(admin: Api) -> None:
    job = _running(admin, "sleep 300", memory_mb=256)

    async def hog() -> str:
        term = await Terminal.open(admin, job)
        try:
            line = f"\"{sys.executable}\" -c \"b = b'x' * (600 << 20); print('HOG', 'SURVIVED')\"; echo HOG=$?END"
            return (await term.run(line, r"HOG=(\d+)END", timeout=60))[1]
        finally:
            term.close()

    status = asyncio.run(hog())
    assert status == "137"  # the kernel's OOM killer, in the task's 256 MB cgroup
    admin.stop(job)


PRELOAD = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
    FILE *f = fopen(MARKS, "a");
    if (f) { fprintf(f, "uid=%d\n", (int)getuid()); fclose(f); }
}
"""


@root_only
def test_a_jobs_environment_does_not_act_on_the_daemons_way_into_the_task(admin: Api, tmp_path: Path) -> None:
    """A job's parameters become its environment: LD_PRELOAD there ran the job's code as root in the command
    that became the task's account (setpriv); it must reach only the shell, which runs as the account."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the preloaded library")
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    marks = lib_dir / "marks"
    marks.touch()
    marks.chmod(0o666)
    (lib_dir / "mark.c").write_text(PRELOAD)
    subprocess.run(
        [cc, "-shared", "-fPIC", f'-DMARKS="{marks}"', "-o", str(lib_dir / "mark.so"), str(lib_dir / "mark.c")],
        check=True,
    )
    reachable(lib_dir / "mark.so")
    bob = admin.new_user("preloadbob")
    role = v2_role(resourcePerInstance={"cpu": 1, "memoryMB": 256, "gpu": 0}, commands=["sleep 300"])
    doc = v2_doc(
        {"main": role},
        name=f"preload{time.time_ns() % 10**9}",
        parameters={"LD_PRELOAD": str(lib_dir / "mark.so")},
        prerequisites=[{"name": "img", "type": "dockerimage", "uri": "busybox"}],
    )
    job = bob.submit_ok(yaml.safe_dump(doc))
    bob.wait(job, {"RUNNING"})
    marks.write_text("")  # what the task's own start left

    async def use() -> None:
        term = await Terminal.open(bob, job)
        try:
            await term.run("echo PRELOAD=${LD_PRELOAD}END", r"PRELOAD=/.*mark\.so")  # the shell has the job's env
        finally:
            term.close()

    asyncio.run(use())
    account = account_of(admin.home, "preloadbob").pw_uid
    seen = set(marks.read_text().split())
    assert f"uid={account}" in seen  # the shell loaded it, as the task's account
    assert "uid=0" not in seen, seen  # nothing the daemon ran as root did
    bob.stop(job)
