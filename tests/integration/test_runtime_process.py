"""The process runtime with real processes, real cgroups (where writable) and the real shims (C and sh)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pai_jupyter.cluster.runtime.base import (
    EXIT_LOST,
    EXIT_START_FAILED,
    TaskHandle,
    TaskStartError,
)
from pai_jupyter.cluster.runtime.cgroups import CgroupManager
from pai_jupyter.cluster.runtime.process import ProcessRuntime
from pai_jupyter.cluster.runtime.taskdir import read_int
from tests.helpers.runtime import SHIMS, Runtimes, make_spec, read, stop_when_ready, wait
from tests.polling import wait_for

CGROUPS = CgroupManager().available
ALLOC = f'"{sys.executable}" -c "b = bytearray(400 * 1024 * 1024); import time; time.sleep(1)"'


@pytest.fixture(params=["c", "c-warm", "sh"])
def runtimes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtimes]:
    """Every test that takes it runs with the C shim started for the task, with a warm C shim moved into place,
    and with shim.sh: all keep the same contract."""
    kind, _, warm = request.param.partition("-")
    r = Runtimes(SHIMS[kind](), warm=2 if warm else 0, warm_dir=tmp_path_factory.mktemp("warm") if warm else None)
    yield r
    r.cleanup()


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    found = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return found


def gone(pids: list[int], timeout: float = 1.0) -> bool:
    """Whether every process of ``pids`` has ended (or is a zombie) within ``timeout`` s."""

    def ended() -> bool:
        return not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)

    try:
        return wait_for(ended, timeout, f"processes {pids} to end")
    except AssertionError:
        return False


def run(rt: ProcessRuntime, tmp_path: Path, script: str, **over):  # type: ignore[no-untyped-def]
    handle = rt.start(make_spec(tmp_path, script, **over))
    return handle, wait(rt, handle, tmp_path)


@pytest.mark.parametrize(("script", "code"), [("true", 0), ("exit 3", 3), ("kill -TERM $$", 143), ("kill -9 $$", 137)])
def test_exit_codes(runtimes: Runtimes, tmp_path: Path, script: str, code: int) -> None:
    _, result = run(runtimes.make(), tmp_path, script)
    assert result.exit_code == code
    assert result.signal == (code - 128 if code > 128 else None)
    assert not result.oom
    assert read(tmp_path, "exit_code").strip() == str(code)


def test_logs_keep_order_and_bytes(runtimes: Runtimes, tmp_path: Path) -> None:
    script = "echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c; printf 'héllo ✓\\n'"
    _, result = run(runtimes.make(), tmp_path, script)
    assert result.exit_code == 0
    assert read(tmp_path, "stdout") == "a\nc\nhéllo ✓\n"
    assert read(tmp_path, "stderr") == "b\n"
    assert read(tmp_path, "all") == "a\nb\nc\nhéllo ✓\n"
    assert (tmp_path / "stdout").read_bytes().endswith("héllo ✓\n".encode())


def test_the_image_notice_goes_to_the_runtime_log_not_the_users_streams(runtimes: Runtimes, tmp_path: Path) -> None:
    """OpenPAI keeps the runtime's words in a log of their own: stdout is the user's."""
    (tmp_path / "all").write_text("[kept]\n")  # a log is only ever appended to
    run(runtimes.make(), tmp_path, "echo out; echo err >&2", image="pai-test/busybox")
    notice = "[pai_jupyter] process runtime: the image 'pai-test/busybox' was not used; the task runs on this host.\n"
    assert read(tmp_path, "runtime") == notice
    assert read(tmp_path, "stdout") == "out\n"
    assert read(tmp_path, "all") in ("[kept]\nout\nerr\n", "[kept]\nerr\nout\n")
    assert read(tmp_path, "stderr") == "err\n"


def test_env_cwd_and_image_recorded(runtimes: Runtimes, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    handle, result = run(
        runtimes.make(),
        tmp_path,
        'echo "$GREETING|$PAI_TEST|$(pwd)"; command -v tee',
        env={"GREETING": "hi there", "PAI_TEST": "1"},
        work_dir=str(work),
        image="some/image:1",
    )
    assert result.exit_code == 0
    first, second = read(tmp_path, "stdout").splitlines()
    assert "'some/image:1' was not used" in read(tmp_path, "runtime")
    assert first == f"hi there|1|{work}"
    assert second.endswith("/tee")  # PATH came from the daemon's environment
    assert handle.info["image"] == "some/image:1"
    assert handle.to_dict() == TaskHandle.from_dict(json.loads(json.dumps(handle.to_dict()))).to_dict()


def test_missing_work_dir_fails_to_start(runtimes: Runtimes, tmp_path: Path) -> None:
    """A work dir inside the task directory is made (td/work is the default); one elsewhere must exist."""
    with pytest.raises(TaskStartError) as err:
        runtimes.make().start(make_spec(tmp_path / "td", "true", work_dir=str(tmp_path / "nope")))
    assert err.value.exit_code == EXIT_START_FAILED
    _, result = run(runtimes.make(), tmp_path / "td2", "pwd", work_dir=str(tmp_path / "td2" / "here"))
    assert result.exit_code == 0 and read(tmp_path / "td2", "stdout") == f"{tmp_path / 'td2' / 'here'}\n"


def test_background_child_does_not_outlive_the_task(runtimes: Runtimes, tmp_path: Path) -> None:
    _, result = run(runtimes.make(), tmp_path, "sleep 1000 & echo $! > bg; echo hi")  # wait() gives up after 30 s
    assert result.exit_code == 0
    assert gone([int(read(tmp_path, "bg"))])
    assert read(tmp_path, "all") == "hi\n"


def test_c_shim_does_not_wait_forever_for_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    """shim.sh's tees would wait as long as such a child holds the pipes; the C shim drains for a bounded time,
    keeps what was written, and the runtime then kills what is left of the group."""
    r = Runtimes(SHIMS["c"]())
    try:
        _, result = run(r.make(), tmp_path, "sh -c 'trap \"\" TERM; sleep 60' & echo $! > bg; echo hi; exit 3")
        assert result.exit_code == 3  # (wait() gives up after 30 s: the shim did not wait for the child)
        assert gone([int(read(tmp_path, "bg"))], timeout=3)
        assert read(tmp_path, "all") == "hi\n"
    finally:
        r.cleanup()


def test_stop_terminates_the_whole_tree(runtimes: Runtimes, tmp_path: Path) -> None:
    rt = runtimes.make()
    handle = rt.start(
        make_spec(tmp_path, "sleep 1000 & echo $! > bg; sh -c 'sleep 1000' & echo $! >> bg; touch ready; wait")
    )
    _, result = stop_when_ready(rt, handle, tmp_path, grace=5)
    assert result.exit_code == 143  # type: ignore[attr-defined]  (SIGTERM ended it, not the SIGKILL after 5 s)
    assert gone([int(x) for x in read(tmp_path, "bg").split()])
    assert gone(group_members(int(handle.id)))


def test_stop_kills_what_ignores_sigterm_after_the_grace(runtimes: Runtimes, tmp_path: Path) -> None:
    rt = runtimes.make()
    handle = rt.start(make_spec(tmp_path, "trap '' TERM; sleep 1000 & echo $! > bg; touch ready; wait; wait"))
    took, result = stop_when_ready(rt, handle, tmp_path, grace=1)
    assert result.exit_code == 137  # type: ignore[attr-defined]
    assert "SIGKILL" in result.diagnostics  # type: ignore[attr-defined]
    assert took >= 0.9  # not before the grace (an upper bound would only measure the machine's load)
    assert gone([int(read(tmp_path, "bg"))])
    assert group_members(int(handle.id)) == []
    assert not rt.is_alive(handle)


@pytest.mark.skipif(not CGROUPS, reason="no writable memory cgroup on this machine")
def test_oom_by_cgroup(runtimes: Runtimes, tmp_path: Path) -> None:
    rt = runtimes.make("cgroup")
    handle, result = run(rt, tmp_path, f"echo before; {ALLOC}", memory_mb=128, cpu=1)
    assert handle.info["memory"] == "cgroup" and handle.info["cgroup"]
    assert result.oom and result.exit_code == 137
    assert "more than 128 MB" in result.diagnostics and "cgroup v" in result.diagnostics
    assert not (tmp_path / "oom").exists()
    assert read(tmp_path, "all").startswith("before\n")
    assert not any(Path(d).exists() for d in handle.info["cgroup_dirs"])  # wait() freed it
    rt.remove(handle)  # and remove() does not mind


@pytest.mark.skipif(not CGROUPS, reason="no writable memory cgroup on this machine")
def test_cgroup_limits_and_escaped_processes(runtimes: Runtimes, tmp_path: Path) -> None:
    rt = runtimes.make("cgroup")
    script = "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > bg; touch ready; sleep 0.5"
    handle = rt.start(make_spec(tmp_path, script, memory_mb=200, cpu=2, work_dir=str(tmp_path)))
    wait_for(lambda: (tmp_path / "ready").exists(), timeout=10)
    dirs = [Path(d) for d in handle.info["cgroup_dirs"]]
    limit = dirs[0] / ("memory.limit_in_bytes" if handle.info["cgroup_version"] == 1 else "memory.max")
    assert limit.read_text().strip() == str(200 << 20)
    for cpu in (d for d in dirs[1:] if (d / "cpu.cfs_quota_us").exists()):
        assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "200000"
    escaped = int(read(tmp_path, "bg"))
    assert str(escaped) in (dirs[0] / "cgroup.procs").read_text().split()
    result = wait(rt, handle, tmp_path)
    assert result.exit_code == 0 and not result.oom
    assert gone([escaped])  # it left the process group, not the cgroup
    rt.remove(handle)


def test_oom_by_watchdog(runtimes: Runtimes, tmp_path: Path) -> None:
    rt = runtimes.make("watchdog")
    handle, result = run(rt, tmp_path, f"echo before; {ALLOC}; echo not reached", memory_mb=128)
    assert handle.info["memory"] == "watchdog" and handle.info["cgroup"] is None
    assert result.oom and result.exit_code == 137
    assert "more than 128 MB" in result.diagnostics and "watchdog" in result.diagnostics
    assert (tmp_path / "oom").exists()
    assert read(tmp_path, "all").startswith("before\n")  # the shim survived and flushed the logs


def test_watchdog_leaves_small_tasks_alone(runtimes: Runtimes, tmp_path: Path) -> None:
    _, result = run(runtimes.make("watchdog"), tmp_path, "sleep 0.5; echo ok", memory_mb=128)
    assert result.exit_code == 0 and not result.oom


ESCAPE_ALLOC = f'"{sys.executable}" -c "b = bytearray(400 * 1024 * 1024); import time; time.sleep(30)"'


@pytest.mark.parametrize("warm", [0, 2])
def test_a_setsid_escape_is_still_counted_by_the_watchdog(tmp_path: Path, warm: int) -> None:
    """``( setsid python ... & )`` leaves the group and, without a subreaper, the shim's tree:
    it allocated 400 MB under a 128 MB limit and the job SUCCEEDED. The C shim adopts it: counted and killed."""
    r = Runtimes(SHIMS["c"](), warm=warm, warm_dir=tmp_path / "warm" if warm else None)
    try:
        rt = r.make("watchdog")
        assert "subreaper" in rt.describe()
        handle, result = run(
            rt, tmp_path / "td", f"( setsid {ESCAPE_ALLOC} & ); sleep 30; echo not reached", memory_mb=128
        )
        assert handle.info["memory"] == "watchdog"
        assert result.oom and result.exit_code == 137, result
        assert "not reached" not in read(tmp_path / "td", "all")
    finally:
        r.cleanup()


def test_stop_reaches_a_setsid_child(tmp_path: Path) -> None:
    """A ``setsid`` child survived ``pai stop``: killpg does not reach another session."""
    r = Runtimes(SHIMS["c"]())
    try:
        rt = r.make("watchdog")
        handle = rt.start(make_spec(tmp_path, "( setsid sleep 1000 & echo $! > bg ); touch ready; sleep 1000"))
        _, result = stop_when_ready(rt, handle, tmp_path, grace=1)
        assert result.exit_code == 143  # type: ignore[attr-defined]
        escaped = int(read(tmp_path, "bg"))
        assert gone([escaped], timeout=5)
    finally:
        r.cleanup()


def test_a_task_over_leaves_no_setsid_descendant(tmp_path: Path) -> None:
    r = Runtimes(SHIMS["c"]())
    try:
        _, result = run(r.make("watchdog"), tmp_path, "( setsid sleep 1000 & echo $! > bg ); echo hi")
        assert result.exit_code == 0
        assert gone([int(read(tmp_path, "bg"))], timeout=10)
    finally:
        r.cleanup()


def _start_in_another_process(task_dir: Path, script: str) -> TaskHandle:
    """Start a task from a short-lived Python process, as a daemon that is then killed: the shim is no child of
    ours and gets reparented when that process exits."""
    spec = json.dumps({"task_dir": str(task_dir), "script": script})
    code = (
        "import json, sys; from pathlib import Path\n"
        "from pai_jupyter.cluster.runtime.process import ProcessRuntime\n"
        "from tests.helpers.runtime import make_spec\n"
        "a = json.loads(sys.argv[1])\n"
        "h = ProcessRuntime().start(make_spec(Path(a['task_dir']), a['script'], memory_mb=256))\n"
        "print(json.dumps(h.to_dict()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, spec], capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2]
    )
    return TaskHandle.from_dict(json.loads(out.stdout))


def test_reattach_to_a_task_that_is_not_our_child(tmp_path: Path) -> None:
    handle = _start_in_another_process(tmp_path, "sleep 1; echo done")
    rt = ProcessRuntime()
    try:
        assert rt.is_alive(handle)
        assert psutil.Process(int(handle.id)).ppid() != os.getpid()
        result = wait(rt, handle, tmp_path)
        assert result.exit_code == 0
        assert read(tmp_path, "all") == read(tmp_path, "stdout") == "done\n"
        assert not rt.is_alive(handle)
    finally:
        if rt.is_alive(handle):
            os.killpg(int(handle.id), signal.SIGKILL)
        rt.remove(handle)


def test_task_that_ended_while_the_daemon_was_down(tmp_path: Path) -> None:
    handle = _start_in_another_process(tmp_path, "echo bye; exit 4")
    rt = ProcessRuntime()
    wait_for(lambda: not rt.is_alive(handle), 10, "the task to end")
    assert not rt.is_alive(handle)
    result = wait(rt, handle, tmp_path)
    assert result.exit_code == 4
    assert read(tmp_path, "all") == "bye\n"
    (tmp_path / "exit_code").unlink()  # as if the shim had been killed before recording anything
    lost = wait(ProcessRuntime(), handle, tmp_path)
    assert lost.exit_code == EXIT_LOST and "daemon was down" in lost.diagnostics
    rt.remove(handle)


def test_pid_reuse_guard(runtimes: Runtimes, tmp_path: Path) -> None:
    rt = runtimes.make()
    handle = rt.start(make_spec(tmp_path, "touch ready; sleep 5"))
    assert rt.is_alive(handle)
    other = TaskHandle.from_dict(handle.to_dict())
    other.info.update(start_ticks=handle.info["start_ticks"] - 1, create_time=handle.info["create_time"] - 100)
    assert not rt.is_alive(other)
    legacy = TaskHandle.from_dict(handle.to_dict())  # psutil create_time alone
    legacy.info.pop("start_ticks")
    assert rt.is_alive(legacy)
    legacy.info["create_time"] -= 100
    assert not rt.is_alive(legacy)
    found = rt.find(tmp_path)
    assert found is not None and found.id == handle.id
    wait_for(lambda: (tmp_path / "ready").exists())  # shim.sh loses a SIGTERM sent before its command runs
    rt.stop(handle, 0.5)
    assert wait(rt, handle, tmp_path).exit_code == 143


def test_stop_without_an_event_loop_is_non_blocking(runtimes: Runtimes, tmp_path: Path) -> None:
    rt = runtimes.make()
    handle = rt.start(make_spec(tmp_path, "trap '' TERM; touch ready; sleep 1000"))
    assert wait_for(lambda: (tmp_path / "ready").exists(), timeout=30)
    rt.stop(handle, 0.5)
    assert rt.is_alive(handle)  # stop() returned before its SIGKILL: it did not block for the grace
    assert wait(rt, handle, tmp_path).exit_code == 137


def test_find_without_a_stored_handle(tmp_path: Path) -> None:
    """shim.sh is started before handle.json is written (the C shim only gets its task after): its pid file and
    command line let a restarted daemon find it."""
    runtimes = Runtimes(SHIMS["sh"]())
    try:
        _find_without_a_stored_handle(runtimes, tmp_path)
    finally:
        runtimes.cleanup()


def _find_without_a_stored_handle(runtimes: Runtimes, tmp_path: Path) -> None:
    rt = runtimes.make()
    handle = rt.start(make_spec(tmp_path, "while [ ! -f go ]; do sleep 0.02; done; exit 6", memory_mb=64))
    # (its `echo $$ > pid` creates the file, then writes it: a reader that comes between sees it empty)
    wait_for(lambda: read_int(tmp_path / "pid") == int(handle.id), 5, "shim.sh's pid in its pid file")
    (tmp_path / "handle.json").unlink()  # as if the daemon died inside start()
    found = ProcessRuntime().find(tmp_path)
    assert found is not None and found.id == handle.id
    assert found.info["start_ticks"] == handle.info["start_ticks"] and rt.is_alive(found)
    assert found.info.get("cgroup") == handle.info.get("cgroup")
    (tmp_path / "go").touch()  # the task runs until now, however slow the machine (it was a 0.5 s sleep)
    assert wait(ProcessRuntime(), found, tmp_path).exit_code == 6
    (tmp_path / "pid").write_text(f"{os.getpid()}\n")  # a pid that is not this task's shim
    stranger = ProcessRuntime().find(tmp_path)
    assert stranger is not None and not rt.is_alive(stranger)
    assert ProcessRuntime().find(tmp_path / "never-started") is None


@pytest.mark.skipif(not CGROUPS, reason="no writable memory cgroup on this machine")
def test_warm_start_hands_the_task_to_a_ready_shim(tmp_path: Path) -> None:
    warm_dir = tmp_path / "warm"
    r = Runtimes(SHIMS["c"](), warm=1, warm_dir=warm_dir)
    try:
        rt = r.make()
        assert rt.warm is not None and "1 warm" in rt.describe()
        ready = rt.warm._ready[0]
        made = {p.name for p in ready.directory.iterdir()}
        assert made == {"work", "run", "command.sh", "stdout", "all", "exit_code"}
        td = tmp_path / "jobs" / "t0"
        td.parent.mkdir()
        work = td / "work"
        handle = rt.start(
            make_spec(
                td,
                'echo "$PAI_TEST|$(pwd)"; grep SigBlk /proc/self/status; sleep 1',
                memory_mb=96,
                work_dir=str(work),
                env={"PAI_TEST": "1", "SECRET": "x"},
            )
        )
        assert int(handle.id) == ready.pid and ready.directory == td  # its directory was moved into place
        assert handle.info["memory"] == "cgroup"
        assert json.loads(read(td, "handle.json"))["info"]["memory_mb"] == 96  # written before the hand-over
        assert "SECRET" not in "".join(p.read_text(errors="replace") for p in td.iterdir() if p.is_file())
        limit = Path(str(handle.info["cgroup"]))
        limit = limit / ("memory.limit_in_bytes" if (limit / "memory.limit_in_bytes").exists() else "memory.max")
        assert int(limit.read_text()) == 96 << 20
        result = wait(rt, handle, td)
        assert result.exit_code == 0
        assert read(td, "exit_code") == "0\n"
        env_line, blocked = read(td, "stdout").splitlines()
        assert env_line == f"1|{work}"
        assert not int(blocked.split()[1], 16) & (1 << (signal.SIGTERM - 1))  # blocked in the shim, not the command
        assert wait_for(lambda: rt.warm is not None and len(rt.warm._ready) == 1, timeout=10)  # refilled
        spare = rt.warm._ready[0]
        rt.close()
        assert spare.popen.wait(5) == 0  # end-of-file without a task: it exits; its directory and cgroup go
        assert not spare.directory.exists() and not any(warm_dir.iterdir())
        assert spare.cgroup is not None and not spare.cgroup.memory_dir.exists()
    finally:
        r.cleanup()


@pytest.mark.skipif(not CGROUPS, reason="no writable memory cgroup on this machine")
def test_warm_start_into_a_missing_work_dir_fails_to_start(tmp_path: Path) -> None:
    r = Runtimes(SHIMS["c"](), warm=1, warm_dir=tmp_path / "warm")
    try:
        rt = r.make()
        with pytest.raises(TaskStartError) as err:
            rt.start(make_spec(tmp_path / "td", "true", memory_mb=64, work_dir=str(tmp_path / "nope")))
        assert err.value.exit_code == EXIT_START_FAILED
    finally:
        r.cleanup()
