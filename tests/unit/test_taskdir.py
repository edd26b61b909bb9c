"""The task directory's names and formats live in runtime/taskdir.py: both shims write the same files under the
same names, both runtimes read them through taskdir, and the Docker runtime stands apart from the process one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pai_jupyter.cluster.runtime import taskdir
from pai_jupyter.cluster.runtime.base import Runtime, TaskSpec
from pai_jupyter.cluster.runtime.process import ProcessRuntime
from pai_jupyter.cluster.runtime.shim import SHELL_ENV_PREFIX, SHIM_C, SHIM_SH, Shim
from pai_jupyter.cluster.runtime.view import HOST
from pai_jupyter.cluster.task.env import Placement, task_env
from pai_jupyter.protocol import Job
from tests.helpers.jobdocs import v2_doc, v2_role

KNOWN = {
    taskdir.STDOUT,
    taskdir.STDERR,
    taskdir.ALL,
    taskdir.RUNTIME_LOG,
    taskdir.PID,
    taskdir.EXIT_CODE,
    taskdir.EXIT_CODE_TMP,
    taskdir.OOM_KILLS,
    taskdir.CGROUP,
}


def test_shim_sh_writes_only_the_named_files() -> None:
    used = set(re.findall(r'"\$d/([A-Za-z0-9_.-]+)"', SHIM_SH.read_text()))
    assert used == KNOWN  # every file shim.sh touches is one taskdir names, and it writes every shim file
    assert f"${{{taskdir.SCRIPT_ENV}-}}" in SHIM_SH.read_text()  # the script arrives in that variable


def test_shim_c_writes_the_same_files() -> None:
    source = SHIM_C.read_text()
    used = set(re.findall(r'task_file\("([A-Za-z0-9_.-]+)"', source))
    # the C shim is handed its pid and cgroup by the runtime and writes exit_code directly (no .tmp, no pid file)
    assert used == {taskdir.STDOUT, taskdir.STDERR, taskdir.ALL, taskdir.RUNTIME_LOG, taskdir.EXIT_CODE}
    assert source.count("openat(task_fd") == 1 and "open_in" not in source  # all through task_file (O_NOFOLLOW)
    assert f'#define EXEC_SOCKET "{taskdir.EXEC_SOCKET}"' in source
    assert f'#define SHELL_ENV "{SHELL_ENV_PREFIX}"' in source


def test_service_files() -> None:
    assert taskdir.service_file("tensorboard", "request") == "service-tensorboard.request"
    assert taskdir.in_shell(taskdir.service_file("ssh", "missing")) == '"$PAI_TASK_DIR/run/service-ssh.missing"'
    with pytest.raises(ValueError):
        taskdir.service_file("ssh", "nope")


def test_integer_files_handles_and_leftovers(tmp_path: Path) -> None:
    assert taskdir.exit_code(tmp_path) is None
    (tmp_path / taskdir.EXIT_CODE).write_text("")  # killed mid-write: missing
    assert taskdir.exit_code(tmp_path) is None
    (tmp_path / taskdir.EXIT_CODE).write_text("137\n")
    assert taskdir.exit_code(tmp_path) == 137
    assert taskdir.read_handle(tmp_path) is None
    (tmp_path / taskdir.HANDLE).write_text("{not json")
    assert taskdir.read_handle(tmp_path) is None
    taskdir.write_handle(tmp_path, {"runtime": "process", "id": "1", "info": {}})
    assert taskdir.read_handle(tmp_path) == {"runtime": "process", "id": "1", "info": {}}
    for name in (taskdir.STDOUT, taskdir.OOM, taskdir.COMMAND):
        (tmp_path / name).write_text("x")
    taskdir.clear_stale(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [taskdir.COMMAND, taskdir.STDOUT]  # logs stay


def test_process_runtime_finds_a_task_by_its_handle_file(tmp_path: Path) -> None:
    taskdir.write_handle(tmp_path, {"runtime": "process", "id": "42", "info": {"start_ticks": 7}})
    found = ProcessRuntime(memory_enforcement="watchdog", shim=Shim(("/bin/sh", str(SHIM_SH)), "sh")).find(tmp_path)
    assert found is not None and found.id == "42" and found.info == {"start_ticks": 7}


def test_the_docker_runtime_stands_apart_from_the_process_runtime() -> None:
    code = (
        "import sys; from pai_jupyter.cluster.runtime import docker; "
        "print('pai_jupyter.cluster.runtime.process' in sys.modules, docker.TASK_MOUNT, docker.COMMAND[1], "
        "docker.DockerRuntime.view is docker.CONTAINER)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", taskdir.IN_CONTAINER, f"{taskdir.IN_CONTAINER}/{taskdir.SHIM_COPY}", "True"]
    assert Runtime.view is HOST and ProcessRuntime.view is HOST  # tasks at host paths


def _env(gpus: list[int]) -> dict[str, str]:
    role = v2_role(resourcePerInstance={"cpu": 1, "memoryMB": 256, "gpu": len(gpus)})
    job = Job.from_text(yaml.safe_dump(v2_doc({"main": role})))
    return task_env(job, "alice", "default", job.task_roles[0], 0, {("main", 0): Placement("127.0.0.1", {}, gpus)})


def test_gpu_visibility_leaves_the_container_runtime_its_default(tmp_path: Path) -> None:
    from pai_jupyter.cluster.runtime.docker import DockerRuntime

    none, two = _env([]), _env([2, 3])
    assert none["CUDA_VISIBLE_DEVICES"] == "" and "NVIDIA_VISIBLE_DEVICES" not in none
    assert two["CUDA_VISIBLE_DEVICES"] == two["NVIDIA_VISIBLE_DEVICES"] == "2,3"

    def container_env(env: dict[str, str], gpus: list[int]) -> dict[str, str]:
        spec = TaskSpec(
            key="k",
            user="alice",
            job_name="j",
            role="main",
            index=0,
            job_attempt=0,
            task_attempt=0,
            script="true",
            env=env,
            image="busybox",
            cpu=1,
            memory_mb=256,
            shm_mb=64,
            gpus=gpus,
            task_dir=tmp_path,
        )
        return DockerRuntime._environment(spec)

    assert container_env(none, [])["NVIDIA_VISIBLE_DEVICES"] == "void"  # the Docker runtime's documented default
    got = container_env(two, [2, 3])
    assert got["NVIDIA_VISIBLE_DEVICES"] == "2,3" and got["CUDA_VISIBLE_DEVICES"] == "0,1"
