"""The Docker runtime against the real dockerd, with the local image pai-test/busybox (no registry reachable)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster.runtime.base import (
    DEFAULT_PIDS_LIMIT,
    EXIT_IMAGE_NOT_FOUND,
    EXIT_LOST,
    EXIT_START_FAILED,
    TaskExit,
    TaskHandle,
    TaskStartError,
)
from pai_jupyter.cluster.runtime.docker import DockerRuntime, docker_available
from pai_jupyter.cluster.runtime.view import Mount
from tests.helpers.runtime import make_spec, read, stop_when_ready, wait

pytestmark = pytest.mark.docker
IMAGE = "pai-test/busybox:latest"

if not docker_available():
    why = "no Docker engine answers (docker.from_env().ping() failed or timed out)"
    if os.environ.get("PAI_TEST_REQUIRE_DOCKER") == "1":
        pytest.fail(f"PAI_TEST_REQUIRE_DOCKER=1 but {why}", pytrace=False)
    pytest.skip(why, allow_module_level=True)


@pytest.fixture(scope="module")
def image() -> str:
    script = Path(__file__).parents[1] / "make_busybox_image.sh"
    done = subprocess.run(["bash", str(script), IMAGE], capture_output=True, text=True)
    assert done.returncode == 0, f"could not build {IMAGE}: {done.stderr}"
    return IMAGE


class Tracked(DockerRuntime):
    """Remembers every container it starts, so each is force-removed after the test, even a failing one."""

    def __init__(self, pids_limit: int = DEFAULT_PIDS_LIMIT) -> None:
        super().__init__(pids_limit=pids_limit)
        self.handles: list[TaskHandle] = []

    def start(self, spec):  # type: ignore[no-untyped-def]
        handle = super().start(spec)
        self.handles.append(handle)
        return handle


@pytest.fixture
def rt() -> Iterator[Tracked]:
    runtime = Tracked()
    yield runtime
    for handle in runtime.handles:
        runtime.remove(handle)
    runtime.client.close()


def spec(tmp_path: Path, script: str, image: str = IMAGE, **over):  # type: ignore[no-untyped-def]
    return make_spec(tmp_path, script, image=image, **over)


def test_hello_world(rt: Tracked, image: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    s = spec(
        tmp_path / "task",
        "echo hello $WHO; sleep 0.05; echo err >&2; sleep 0.05; cat /userhome/greeting; pwd",
        env={"WHO": "world", "CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"},
        memory_mb=128,
        cpu=1,
        shm_mb=32,
        work_dir="/tmp",
        mounts=[Mount(str(home), "/userhome", True)],
    )
    home.mkdir()
    (home / "greeting").write_text("hi from home\n")
    handle = rt.start(s)
    attrs = rt.client.api.inspect_container(handle.id)
    result = wait(rt, handle, s.task_dir)
    assert result == TaskExit(exit_code=0)
    logs = rt.logs_dir(s.task_dir)  # the container's shim writes them into run/, the control part is read-only
    assert logs == s.task_dir / "run"
    assert read(logs, "stdout") == "hello world\nhi from home\n/tmp\n"
    assert read(logs, "stderr") == "err\n"
    assert read(logs, "all").splitlines()[:2] == ["hello world", "err"]
    labels = attrs["Config"]["Labels"]
    assert labels["pai.managed"] == "1" and labels["pai.job"] == f"tester~{s.job_name}"
    assert (labels["pai.user"], labels["pai.role"], labels["pai.index"], labels["pai.key"]) == (
        "tester",
        "main",
        "0",
        s.key,
    )
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "host"
    assert host["Memory"] == host["MemorySwap"] == 128 << 20
    assert host["NanoCpus"] == 1_000_000_000 and host["ShmSize"] == 32 << 20
    assert not host.get("DeviceRequests")
    assert "NVIDIA_VISIBLE_DEVICES=void" in attrs["Config"]["Env"]
    assert handle.info["image"] == IMAGE and rt.find(s.task_dir) == handle


def test_exit_code(rt: Tracked, image: str, tmp_path: Path) -> None:
    s = spec(tmp_path, "echo bye; exit 7")
    result = wait(rt, rt.start(s), tmp_path)
    assert result.exit_code == 7 and not result.oom
    assert read(tmp_path / "run", "exit_code").strip() == "7"


OOM_SCRIPT = "echo start; x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived"


class LateOOMEvent(Tracked):
    """The engine's OOM event came after the container's exit (containerd#12714; CI-18 on this dockerd, under load),
    so Docker says ``OOMKilled: false``: the shim's own count from the container's cgroup must still tell."""

    def _wait_blocking(self, cid: str):  # type: ignore[no-untyped-def]
        container = super()._wait_blocking(cid)
        container.attrs["State"]["OOMKilled"] = False
        return container


@pytest.mark.parametrize("late_event", [False, True], ids=["docker-says", "docker-late"])
def test_oom_is_reported(image: str, tmp_path: Path, late_event: bool) -> None:
    rt = LateOOMEvent() if late_event else Tracked()
    try:
        result = wait(rt, rt.start(spec(tmp_path, OOM_SCRIPT, memory_mb=64)), tmp_path, timeout=60)
    finally:
        for handle in rt.handles:
            rt.remove(handle)
    assert result.oom and result.exit_code == 137
    assert "out of memory" in result.diagnostics and "Docker" in result.diagnostics and "64 MB" in result.diagnostics
    assert read(tmp_path / "run", "all").startswith("start\n")
    assert "survived" not in read(tmp_path / "run", "all")
    assert int(read(tmp_path / "run", "oom_kills")) >= 1  # the shim counted the kernel's kill


def test_a_sigkill_without_oom_is_not_reported_as_oom(rt: Tracked, image: str, tmp_path: Path) -> None:
    result = wait(rt, rt.start(spec(tmp_path, "echo start; kill -9 $$")), tmp_path)
    assert result.exit_code == 137 and result.signal == 9 and not result.oom
    assert read(tmp_path / "run", "oom_kills") == "0\n"


def test_a_container_that_forks_all_it_can_stays_under_its_pids_limit(image: str, tmp_path: Path) -> None:
    """No pids limit per task. Only builtins once the forks begin (a full container cannot fork
    a ``cat``): the subshell counts its forks in a file until one fails."""
    rt = Tracked(pids_limit=40)
    try:
        assert "at most 40 processes per task" in rt.describe()
        forks = "i=0; while [ $i -lt 300 ]; do sleep 30 & i=$((i+1)); echo $i > /tmp/forked; done"
        s = spec(tmp_path, f"( {forks} ) 2>/dev/null || true; read n < /tmp/forked; echo forked $n")
        handle = rt.start(s)
        result = wait(rt, handle, tmp_path, timeout=60)
        assert result.exit_code == 0, read(tmp_path / "run", "all")
        assert 0 < int(read(tmp_path / "run", "stdout").split()[-1]) < 40
        assert rt.client.containers.get(handle.id).attrs["HostConfig"]["PidsLimit"] == 40
    finally:
        for handle in rt.handles:
            rt.remove(handle)
        rt.client.close()


def test_image_not_found_fails_fast(rt: Tracked, image: str, tmp_path: Path) -> None:
    s = spec(tmp_path, "true", image="pai-test/no-such-image:0.0")
    with pytest.raises(TaskStartError) as err:
        rt.start(s)
    assert err.value.exit_code == EXIT_IMAGE_NOT_FOUND
    assert err.value.diagnostics.startswith("image not found: pai-test/no-such-image:0.0 is not present locally")
    assert not rt.client.containers.list(all=True, filters={"label": f"pai.key={s.key}"})


def test_gpu_request_without_nvidia_runtime(rt: Tracked, image: str, tmp_path: Path) -> None:
    s = spec(tmp_path, "true", gpus=[0], env={"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "0"})
    try:
        handle = rt.start(s)
    except TaskStartError as exc:  # no NVIDIA runtime here: a clear error and no half-made container
        assert exc.exit_code == EXIT_START_FAILED and "GPU" in exc.diagnostics
        assert not rt.client.containers.list(all=True, filters={"label": f"pai.key={s.key}"})
    else:  # a machine with GPUs: it simply runs
        assert rt.client.api.inspect_container(handle.id)["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == ["0"]
        assert wait(rt, handle, tmp_path).exit_code == 0


def test_stop_a_sleeping_container(rt: Tracked, image: str, tmp_path: Path) -> None:
    handle = rt.start(spec(tmp_path, "sleep 1000 & touch /pai/task/run/ready; wait"))
    _, result = stop_when_ready(rt, handle, tmp_path / "run", grace=5, end_within=15)
    assert result.exit_code == 143  # SIGTERM ended it, not the SIGKILL after the grace
    assert not rt.is_alive(handle)


def test_stop_kills_after_the_grace(rt: Tracked, image: str, tmp_path: Path) -> None:
    handle = rt.start(spec(tmp_path, "trap '' TERM; sleep 1000 & touch /pai/task/run/ready; wait; wait"))
    took, result = stop_when_ready(rt, handle, tmp_path / "run", grace=1, end_within=15)
    assert result.exit_code == 137 and took >= 0.9  # not before the grace
    assert "SIGKILL" in result.diagnostics
    assert not rt.is_alive(handle)


def test_recover_and_remove(rt: Tracked, image: str, tmp_path: Path) -> None:
    s = spec(tmp_path, "sleep 1000")
    handle = rt.start(s)
    assert rt.is_alive(handle)
    found = [h for h in DockerRuntime(rt.client).recover() if h.id == handle.id]
    assert len(found) == 1 and found[0].info["key"] == s.key and found[0].info["image"] == IMAGE
    rt.remove(handle)
    assert not rt.is_alive(handle)
    assert not rt.client.containers.list(all=True, filters={"id": handle.id})
    rt.remove(handle)  # removing twice is fine
    lost = wait(rt, handle, tmp_path)
    assert lost.exit_code == EXIT_LOST and "container is gone" in lost.diagnostics


def test_gpu_environment(tmp_path: Path) -> None:
    none = DockerRuntime._environment(spec(tmp_path, "true"))
    assert none["NVIDIA_VISIBLE_DEVICES"] == "void"  # a CUDA image's NVIDIA_VISIBLE_DEVICES=all must not apply
    two = DockerRuntime._environment(
        spec(tmp_path, "true", gpus=[2, 3], env={"CUDA_VISIBLE_DEVICES": "2,3", "NVIDIA_VISIBLE_DEVICES": "2,3"})
    )
    assert two["NVIDIA_VISIBLE_DEVICES"] == "2,3"  # host ids, for the NVIDIA runtime
    assert two["CUDA_VISIBLE_DEVICES"] == "0,1"  # as numbered inside the container


def test_two_tasks_with_the_same_key_do_not_collide(rt: Tracked, image: str, tmp_path: Path) -> None:
    first = spec(tmp_path / "a", "sleep 1000")
    second = spec(tmp_path / "b", "echo second", key=first.key)
    h1 = rt.start(first)
    h2 = rt.start(second)
    assert h1.info["name"] != h2.info["name"] and h1.info["name"].startswith("pai-tester-rt")
    assert wait(rt, h2, second.task_dir).exit_code == 0
    assert rt.is_alive(h1)
