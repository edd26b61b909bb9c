"""The daemon on the Docker runtime: one container per task, host network, limits, OOM, missing images."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers.daemon import Api, v1
from tests.polling import wait_for

pytestmark = pytest.mark.docker


def test_hello_world_in_a_container(docker_daemon: Api) -> None:
    info = docker_daemon.http.get("/api/v2/info").json()
    assert info["runtime"].startswith("docker")
    name = docker_daemon.submit_ok(
        v1("dhello", "echo hello from $PAI_CURRENT_TASK_ROLE_NAME; ls /userhome >/dev/null; echo err >&2", taskNumber=2)
    )
    d = docker_daemon.wait(name, timeout=60)
    assert d["jobStatus"]["state"] == "SUCCEEDED", d
    for t in docker_daemon.tasks(d):
        assert t["runtime"] == "docker" and t["containerId"]
    assert docker_daemon.log(name, index=1, name="stdout").strip() == "hello from main"
    assert docker_daemon.log(name, index=1, name="stderr").strip() == "err"


def test_a_container_sees_its_task_dir_and_no_gpu(docker_daemon: Api) -> None:
    """PAI_TASK_DIR is the mount; without GPUs the Docker runtime's NVIDIA_VISIBLE_DEVICES=void applies (a CUDA
    image's own =all must not expose the host's GPUs), not a value the daemon's task environment forced."""
    name = docker_daemon.submit_ok(
        v1(
            "dvis",
            'echo "nvidia=${NVIDIA_VISIBLE_DEVICES-unset} '
            'cuda=[${CUDA_VISIBLE_DEVICES-unset}] dir=$PAI_TASK_DIR"; '
            'test -f "$PAI_TASK_DIR/command.sh"',
        )
    )
    d = docker_daemon.wait(name, timeout=60)
    assert d["jobStatus"]["state"] == "SUCCEEDED", d
    assert docker_daemon.log(name, name="stdout").strip() == "nvidia=void cuda=[] dir=/pai/task"


def test_two_roles_talk_over_host_network_ports(docker_daemon: Api) -> None:
    job = {
        "jobName": "dnet",
        "image": "pai-test/busybox:latest",
        "taskRoles": [
            {
                "name": "server",
                "taskNumber": 1,
                "cpuNumber": 1,
                "memoryMB": 128,
                "gpuNumber": 0,
                "portList": [{"label": "http", "beginAt": 0, "portNumber": 1}],
                "minSucceededTaskCount": None,
                "command": "mkdir -p /tmp/www && echo pong > /tmp/www/ping && "
                "httpd -f -p $PAI_PORT_LIST_server_0_http -h /tmp/www",
            },
            {
                "name": "client",
                "taskNumber": 1,
                "cpuNumber": 1,
                "memoryMB": 128,
                "gpuNumber": 0,
                "minSucceededTaskCount": 1,
                "command": "for i in $(seq 50); do wget -qO- http://$PAI_HOST_IP_server_0:$PAI_PORT_LIST_server_0_http/ping"
                " && exit 0; sleep 0.1; done; exit 4",
            },
        ],
    }
    name = docker_daemon.submit_ok(json.dumps(job))
    d = docker_daemon.wait(name, timeout=60)
    assert d["jobStatus"]["state"] == "SUCCEEDED", d
    assert "pong" in docker_daemon.log(name, "client", 0, "stdout")


def test_oom_in_a_container_fails_with_a_diagnostic(docker_daemon: Api) -> None:
    name = docker_daemon.submit_ok(
        v1("doom", "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived", memoryMB=128, shmMB=16)
    )
    d = docker_daemon.wait(name, timeout=60)
    assert d["jobStatus"]["state"] == "FAILED"
    task = docker_daemon.tasks(d)[0]
    assert task["containerExitDiagnostics"].startswith("out of memory"), task
    assert task["containerExitSpec"]["phrase"] == "UserContainerDockerOOMKilled"


def test_missing_image_fails_fast_with_image_not_found(docker_daemon: Api) -> None:
    job = json.loads(v1("dmissing", "true"))
    job["image"] = "pai-test/does-not-exist:1.0"
    t0 = time.monotonic()
    name = docker_daemon.submit_ok(json.dumps(job))
    d = docker_daemon.wait(name, timeout=30)
    assert time.monotonic() - t0 < 15
    assert d["jobStatus"]["state"] == "FAILED"
    task = docker_daemon.tasks(d)[0]
    assert task["containerExitCode"] == 254
    assert "image not found" in task["containerExitDiagnostics"]
    assert task["containerExitSpec"]["phrase"] == "ContainerImageNotExists"
    # the failure says what to do, and the job's log (the Lab's log box) says it too, not "(empty)"
    assert "docker pull pai-test/does-not-exist:1.0" in task["containerExitDiagnostics"]
    assert "pai cluster start --runtime process" in task["containerExitDiagnostics"]
    log = docker_daemon.log(name)
    assert "the task did not start: image not found" in log and "--runtime process" in log, log


def test_stop_a_running_container(docker_daemon: Api) -> None:
    import docker

    name = docker_daemon.submit_ok(v1("dstop", "sleep 1000"))
    cid = wait_for(lambda: docker_daemon.tasks(docker_daemon.detail(name))[0]["containerId"], 30, "the container")
    docker_daemon.stop(name)
    assert docker_daemon.wait(name, timeout=20)["jobStatus"]["state"] == "STOPPED"
    engine = docker.from_env()

    def removed() -> bool:
        try:
            engine.containers.get(cid)
        except docker.errors.NotFound:
            return True
        return False

    # the container is removed once its stop is seen
    wait_for(removed, 10, f"container {cid} to be removed after the job STOPPED")


def test_is_debug_keeps_the_failed_container_until_delete(docker_daemon: Api) -> None:
    import docker

    job = json.loads(v1("ddebug", "exit 9"))
    job["jobEnvs"] = {"isDebug": True}
    name = docker_daemon.submit_ok(json.dumps(job))
    d = docker_daemon.wait(name, timeout=30)
    cid = docker_daemon.tasks(d)[0]["containerId"]
    client = docker.from_env()
    assert client.containers.get(cid).attrs["State"]["ExitCode"] == 9
    assert docker_daemon.http.delete(f"/api/v2/jobs/{name}").status_code == 200
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(cid)


def test_the_owners_data_and_output_dirs_are_mounted_in_the_container(docker_daemon: Api, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    (data / "in.txt").write_text("from the host\n")
    job = json.loads(
        v1(
            "ddirs",
            "cat $PAI_DATA_DIR/in.txt > $PAI_OUTPUT_DIR/copy.txt; "
            "touch $PAI_DATA_DIR/nope 2>/dev/null && exit 9 || exit 0",
        )
    )
    job.update(dataDir=str(data), outputDir=str(out))
    name = docker_daemon.submit_ok(json.dumps(job))
    d = docker_daemon.wait(name, timeout=60)
    assert d["jobStatus"]["state"] == "SUCCEEDED", d  # the data dir is read-only
    assert (out / "copy.txt").read_text() == "from the host\n"


# Linux capability numbers (linux/capability.h) of the ones the test names
CAP_BITS = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "FOWNER": 3,
    "FSETID": 4,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "SETPCAP": 8,
    "NET_BIND_SERVICE": 10,
    "NET_ADMIN": 12,
    "NET_RAW": 13,
    "SYS_CHROOT": 18,
    "SYS_PTRACE": 19,
    "SYS_ADMIN": 21,
    "MKNOD": 27,
    "AUDIT_WRITE": 29,
    "SETFCAP": 31,
}


def test_a_container_cannot_sniff_loopback_make_devices_or_gain_privileges(docker_daemon: Api) -> None:
    """The attack of a task with host networking: an AF_PACKET socket on lo (busybox's arping opens one) reads
    the daemon's loopback traffic; a /dev/mem node made in run/ is the host's memory for whoever opens it there.
    The container holds only dockercaps.KEPT, in its bounding set too, under no-new-privileges."""
    from pai_jupyter.cluster.runtime.dockercaps import KEPT, NEVER

    script = (
        "grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status; "
        'out=$(arping -c 1 -w 1 -I lo 127.0.0.1 2>&1) || true; echo "$out"; '
        'if mknod "$PAI_TASK_DIR/run/mem" c 1 1 2>/dev/null; then echo mknod=made; else echo mknod=refused; fi'
    )
    name = docker_daemon.submit_ok(v1("dconfine", script))
    d = docker_daemon.wait(name, timeout=60)
    out = docker_daemon.log(name, name="stdout")
    assert d["jobStatus"]["state"] == "SUCCEEDED", (d, out)
    status = dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)
    kept = sum(1 << CAP_BITS[c] for c in KEPT)
    for field in ("CapEff", "CapBnd"):
        held = int(status[field], 16)
        names = sorted(c for c, bit in CAP_BITS.items() if held >> bit & 1)
        assert not {"NET_RAW", "MKNOD"} & set(names) and not NEVER & set(names), (field, names)
        assert held == kept, (field, names)
    assert status["NoNewPrivs"].strip() == "1"
    assert "arping: socket: Operation not permitted" in out, out  # AF_PACKET refused (not: lo is not ARPable)
    assert "mknod=refused" in out and not list(docker_daemon.home.rglob("mem"))
