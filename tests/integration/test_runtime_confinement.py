"""What keeps a process-runtime task in its place: the shim (root, on a shared machine) writes through no
link planted in the task's directory, and a task's processes are capped by its pids cgroup."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.runtime import taskdir
from pai_jupyter.cluster.runtime.base import TaskStartError
from pai_jupyter.cluster.runtime.cgroups import CgroupManager
from pai_jupyter.cluster.runtime.shim import SHIM_SH, Shim
from tests.helpers.daemon import kill_leftovers, reachable, start_daemon, v1
from tests.helpers.runtime import SHIMS, Runtimes, make_spec, read, wait
from tests.polling import wait_for

PASSWD = "root:x:0:0:root:/root:/bin/bash\n"
NOBODY = (65534, 65534)


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A file the task's account may not write (as /etc/passwd): what a planted link points at."""
    path = tmp_path / "passwd"
    path.write_text(PASSWD)
    path.chmod(0o644)
    return path


def _untouched(path: Path) -> None:
    st = path.stat()
    assert path.read_text() == PASSWD and (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())


@pytest.fixture(params=["c", "c-warm"])
def c_runtimes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtimes]:
    warm = request.param == "c-warm"
    r = Runtimes(SHIMS["c"](), warm=1 if warm else 0, warm_dir=tmp_path / "warm" if warm else None)
    yield r
    r.cleanup()


@pytest.mark.parametrize("as_account", [False, True])
def test_the_shim_writes_through_no_symlink_planted_in_the_task_dir(
    c_runtimes: Runtimes, tmp_path: Path, target: Path, as_account: bool
) -> None:
    """``stderr`` and ``runtime`` are made when first written, so a task that could write its
    directory planted them as links to /etc/passwd: the root shim appended to it and chowned it to the task."""
    if as_account and os.geteuid() != 0:
        pytest.skip("running a task as another account needs root")
    rt = c_runtimes.make()
    td = tmp_path / "td"
    planted = [taskdir.STDERR, taskdir.RUNTIME_LOG]  # the shim makes them when it first writes to them
    if rt.warm is not None:  # planted in the warm directory that becomes the task's (its other files are made)
        where = rt.warm._ready[0].directory
    else:
        where = td
        td.mkdir()
        planted.append(taskdir.EXIT_CODE)
    for name in planted:
        (where / name).symlink_to(target)
    if as_account:
        reachable(td)
    spec = make_spec(td, "echo out; echo err >&2", image="some/image:1", run_as=NOBODY if as_account else None)
    result = wait(rt, rt.start(spec), td)
    assert result.exit_code == 0
    _untouched(target)
    assert read(td, taskdir.ALL) == "out\nerr\n"  # the task's stderr still reaches its combined log
    assert (td / taskdir.STDERR).is_symlink() and (td / taskdir.RUNTIME_LOG).is_symlink()  # refused, left be
    assert taskdir.exit_code(td) == 0 and not (td / taskdir.EXIT_CODE).is_symlink()  # made new
    for name in (taskdir.STDOUT, taskdir.ALL, taskdir.EXIT_CODE):  # the shim's files stay the shim's account's
        assert (td / name).stat().st_uid == os.geteuid()


def test_the_shim_refuses_a_hard_link_planted_as_its_log(tmp_path: Path, target: Path) -> None:
    """A hard link to a file the task cannot write, in place of a log the shim appends to: the task fails to
    start rather than the shim writing into that file."""
    r = Runtimes(SHIMS["c"]())
    try:
        td = tmp_path / "td"
        td.mkdir()
        os.link(target, td / taskdir.ALL)
        try:
            rt = r.make()
            result = wait(rt, rt.start(make_spec(td, "echo out")), td)
        except TaskStartError:
            pass
        else:
            assert result.exit_code != 0
        _untouched(target)
    finally:
        r.cleanup()


@pytest.mark.skipif(os.geteuid() != 0, reason="another account to call from needs root")
def test_only_the_shims_own_account_may_ask_it_for_a_shell(tmp_path: Path) -> None:
    """The shim makes its socket when the daemon first asks (SIGUSR1, through a pidfd): 0600, its own account's;
    and were the file open to all, the shim still refuses a caller that is neither root nor that account."""
    r = Runtimes(SHIMS["c"]())
    try:
        rt = r.make()
        td = tmp_path / "td"
        handle = rt.start(make_spec(td, "sleep 30"))
        argv, env, cwd = rt.terminal_command(handle, {"PATH": os.environ["PATH"]}, None)
        assert cwd is None and not (td / taskdir.EXEC_SOCKET).exists()  # no socket until a shell is asked for
        client = [*argv[: argv.index("/bin/sh")], "/bin/sh", "-c", "echo SHELL-RAN-$(id -u)"]
        done = subprocess.run(client, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
        assert (done.returncode, done.stdout) == (0, b"SHELL-RAN-0\n"), done.stderr
        st = (td / taskdir.EXEC_SOCKET).lstat()
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
        (td / taskdir.EXEC_SOCKET).chmod(0o666)
        reachable(td / taskdir.EXEC_SOCKET)
        client[0] = shutil.copy(client[0], tmp_path / "pai-shim")  # the cache it was built in is root's own
        done = subprocess.run(
            client, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=30, user=NOBODY[0], group=NOBODY[1]
        )
        assert done.returncode == 255 and b"SHELL-RAN" not in done.stdout, done
        assert b"refused this caller" in done.stderr  # connected, and then refused by the shim
    finally:
        r.cleanup()


PIDS = CgroupManager().pids_parent is not None
FORKS = f"""\"{sys.executable}\" -c '
import os, signal, time
kids = []
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
print("forked", len(kids), flush=True)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
'"""


@pytest.mark.skipif(not PIDS, reason="no writable pids cgroup on this machine")
@pytest.mark.parametrize("kind", ["c", "c-warm", "sh"])
def test_a_task_that_forks_all_it_can_stays_under_its_pids_limit(tmp_path: Path, kind: str) -> None:
    """Nothing capped a task's processes; a fork bomb in one task took the machine's pid space."""
    shim = SHIMS["c"]() if kind != "sh" else Shim(("/bin/sh", str(SHIM_SH)), "sh")
    r = Runtimes(shim, warm=1 if kind == "c-warm" else 0, warm_dir=tmp_path / "warm" if kind == "c-warm" else None)
    r.pids_limit = 40
    try:
        rt = r.make("cgroup")
        assert "processes: at most 40 per task (pids cgroup)" in rt.describe()
        handle = rt.start(make_spec(tmp_path / "td", FORKS, memory_mb=256))
        result = wait(rt, handle, tmp_path / "td")
        assert result.exit_code == 0, read(tmp_path / "td", taskdir.ALL)
        forked = int(wait_for(lambda: read(tmp_path / "td", taskdir.STDOUT).split()[-1], 5, "the count"))
        assert 0 < forked < 40  # the shim, its shell and python count too
    finally:
        r.cleanup()


BOMB = """python3 -c '
import os, time
forked = 0
while True:
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        forked += 1
    except OSError:
        print("refused after", forked, flush=True)
        time.sleep(600)
'"""


@pytest.mark.skipif(not PIDS, reason="no writable pids cgroup on this machine")
def test_a_stopped_fork_bomb_job_says_why_in_its_detail(pai_home: Path) -> None:
    """A job whose task forks until its pids limit refuses, and is then stopped: its detail showed exitCode and
    exitDiagnostics null (the stop's reason only in its events, the fork bomb nowhere). Now the job and its attempt
    carry OpenPAI's exit code of a stopped job with the reason, and the task's diagnostics name the limit."""
    admin = start_daemon(pai_home, extra_args=["--pids-limit", "40"])
    try:
        bob = admin.new_user("bob")
        job = bob.submit_ok(v1("bomb", BOMB, memoryMB=1024))
        wait_for(lambda: "refused after" in bob.log(job), 60, "the fork bomb to reach its limit")
        assert bob.stop(job).status_code == 202
        status = bob.wait(job, timeout=60)["jobStatus"]
        assert (status["state"], status["appExitCode"], status["appExitDiagnostics"]) == (
            "STOPPED",
            -210,
            "stopped by bob",
        )
        [attempt] = bob.http.get(f"/api/v2/jobs/{job}/job-attempts").json()
        assert attempt["exitCode"] == -210 and attempt["exitDiagnostics"]["diagnosticsSummary"] == "stopped by bob"
        [task] = attempt["taskRoles"]["main"]["taskStatuses"]
        said = task["containerExitDiagnostics"]
        assert said.startswith("the task reached its limit of 40 processes (pids cgroup): ") and "refused" in said
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)
