"""Job lifecycle on the real daemon (process runtime): states, env, logs, completion, retries, stop, limits."""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from pai_jupyter.cluster import control
from pai_jupyter.common.states import FINAL
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1
from tests.polling import wait_for


def test_hello_world_end_to_end(daemon: Api) -> None:
    job = daemon.submit_ok(v1("hello", "echo hello from $PAI_JOB_NAME; echo oops >&2"))
    d = daemon.wait(job)
    assert d["jobStatus"]["state"] == "SUCCEEDED"
    assert d["jobStatus"]["appExitCode"] == 0
    task = daemon.tasks(d)[0]
    assert task["taskState"] == "SUCCEEDED" and task["containerExitCode"] == 0
    assert task["runtime"] == "process"
    all_log = daemon.log(job)
    assert "[pai_jupyter]" not in all_log  # the runtime's notice has a log of its own (OpenPAI's "runtime")
    runtime_log = next((daemon.home / "local" / "jobs").glob("*~hello/a0.main-0.t0/runtime")).read_text()
    assert runtime_log.startswith("[pai_jupyter] process runtime: the image 'pai-test/busybox:latest'")
    assert "hello from hello" in all_log and "oops" in all_log
    assert "oops" not in daemon.log(job, name="stdout")
    assert daemon.log(job, name="stderr").strip() == "oops"


def test_env_of_a_multi_role_job(daemon: Api) -> None:
    job = {
        "jobName": "envs",
        "image": "busybox",
        "jobEnvs": {"LR": 0.1, "isDebug": False},
        "taskRoles": [
            {
                "name": "ps",
                "taskNumber": 1,
                "cpuNumber": 1,
                "memoryMB": 128,
                "gpuNumber": 0,
                "portList": [{"label": "grpc", "beginAt": 0, "portNumber": 2}],
                "command": "env | sort",
            },
            {
                "name": "worker",
                "taskNumber": 2,
                "cpuNumber": 1,
                "memoryMB": 128,
                "gpuNumber": 0,
                "minSucceededTaskCount": 2,
                "command": "env | sort",
            },
        ],
    }
    name = daemon.submit_ok(json.dumps(job))
    d = daemon.wait(name)
    assert d["jobStatus"]["state"] == "SUCCEEDED", d
    grpc = daemon.tasks(d, "ps")[0]["containerPorts"]["grpc"].split(",")
    assert len(grpc) == 2 and len(set(grpc)) == 2
    env = dict(line.split("=", 1) for line in daemon.log(name, "worker", 1, "stdout").splitlines() if "=" in line)
    user = name.split("~")[0]
    assert env["PAI_JOB_NAME"] == "envs" and env["PAI_USER_NAME"] == user
    assert env["PAI_TASK_ROLE_COUNT"] == "2" and env["PAI_TASK_ROLE_LIST"] == "ps,worker"
    assert env["PAI_TASK_ROLE_TASK_COUNT_worker"] == "2" and env["PAI_TASK_ROLE_TASK_COUNT_ps"] == "1"
    assert env["PAI_CURRENT_TASK_ROLE_NAME"] == "worker"
    assert env["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"] == "1" and env["PAI_TASK_INDEX"] == "1"
    assert env["PAI_PORT_LIST_ps_0_grpc"] == ",".join(grpc)
    assert env["PAI_HOST_IP_ps_0"] == "127.0.0.1"
    assert env["PAI_RESOURCE_worker"] == "0,1,128,64"
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_worker"] == "2" and env["PAI_MIN_FAILED_TASK_COUNT_worker"] == "1"
    assert env["PAI_TASK_ROLE_INSTANCES"] == "ps:0,worker:0,worker:1"
    assert env["LR"] == "0.1" and env["isDebug"] == "false"
    # no GPU: CUDA sees none; NVIDIA_VISIBLE_DEVICES is the container runtime's to set (docker: void), not a host's
    assert env["CUDA_VISIBLE_DEVICES"] == "" and "NVIDIA_VISIBLE_DEVICES" not in env


def test_workers_reach_the_ps_over_its_allocated_port(daemon: Api) -> None:
    server = (
        "python3 -c \"import http.server as h, os; s=h.HTTPServer(('127.0.0.1', "
        "int(os.environ['PAI_PORT_LIST_ps_0_grpc'])), h.SimpleHTTPRequestHandler); s.timeout=20; "
        '[s.handle_request() for _ in range(2)]"'
    )
    client = (
        'python3 -c "import os, time, urllib.request as u\n'
        "url='http://%s:%s/' % (os.environ['PAI_HOST_IP_ps_0'], os.environ['PAI_PORT_LIST_ps_0_grpc'])\n"
        "for i in range(100):\n"
        "    try: print('ps answered', u.urlopen(url).status); break\n"
        "    except OSError: time.sleep(0.1)\n"
        'else: raise SystemExit(3)"'
    )
    job = f"""
protocolVersion: 2
name: psworker
type: job
prerequisites: [{{name: img, type: dockerimage, uri: busybox}}]
taskRoles:
  ps:
    instances: 1
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0, ports: {{grpc: 1}}}}
    commands: [{json.dumps(server)}]
  worker:
    instances: 2
    dockerImage: img
    resourcePerInstance: {{cpu: 1, memoryMB: 256, gpu: 0}}
    commands: [{json.dumps(client)}]
"""
    name = daemon.submit_ok(job)
    d = daemon.wait(name, timeout=60)
    assert d["jobStatus"]["state"] == "SUCCEEDED", d
    for i in range(2):
        assert "ps answered 200" in daemon.log(name, "worker", i, "stdout")


def test_the_clusters_task_port_range_holds_every_tasks_ports(pai_home: Path) -> None:
    """``taskPorts`` in cluster.yaml (a range a firewall opens): the tasks' ports come from it, none twice;
    a job wanting more than it holds is refused at submit, saying so."""
    (pai_home / "local").mkdir(parents=True, mode=0o700)
    (pai_home / "local" / "cluster.yaml").write_text("taskPorts: 28500-28509\n")
    api = start_daemon(pai_home)
    try:
        ports = [{"label": "grpc", "beginAt": 0, "portNumber": 2}]
        name = api.submit_ok(v1("ranged", 'echo "$PAI_PORT_LIST_main_0_grpc"', taskNumber=2, portList=ports))
        detail = api.wait(name, timeout=60)
        assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
        given = [int(p) for t in api.tasks(detail) for p in t["containerPorts"]["grpc"].split(",")]
        assert len(set(given)) == 4 and all(28500 <= p <= 28509 for p in given), given
        assert api.log(name, name="stdout").strip() == api.tasks(detail)[0]["containerPorts"]["grpc"]
        r = api.submit(v1("greedy", "true", taskNumber=3, portList=[{**ports[0], "portNumber": 4}]))
        assert r.status_code == 400 and "want 12 ports and the cluster hands out 10 (28500-28509" in r.text, r.text
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)


def test_gang_jobs_that_each_need_all_cpus_run_one_after_the_other(daemon: Api) -> None:
    first = daemon.submit_ok(v1("gang1", "sleep 1", taskNumber=2, cpuNumber=4))
    second = daemon.submit_ok(v1("gang2", "sleep 0.2", taskNumber=2, cpuNumber=4))
    daemon.wait(first, ("RUNNING",))
    d2 = wait_for(lambda: (d := daemon.detail(second))["jobStatus"]["waitingReason"] and d, 10, "gang2's reason")
    assert daemon.detail(first)["jobStatus"]["state"] == "RUNNING"
    assert d2["jobStatus"]["state"] == "WAITING"
    assert "needs 8 CPU, 0 free" in d2["jobStatus"]["waitingReason"]
    a, b = daemon.wait(first), daemon.wait(second)
    assert a["jobStatus"]["state"] == b["jobStatus"]["state"] == "SUCCEEDED"
    assert b["jobStatus"]["launchedTime"] >= a["jobStatus"]["completedTime"]


def test_fifo_waiting_reason_counts_jobs_ahead(daemon: Api) -> None:
    big = daemon.submit_ok(v1("big", "sleep 1", cpuNumber=8))
    daemon.submit_ok(v1("next", "true", cpuNumber=8))
    third = daemon.submit_ok(v1("small", "true", cpuNumber=1))
    daemon.wait(big, ("RUNNING",))  # out of the queue: the reason counts the jobs ahead at the time it is read
    reason = daemon.detail(third)["jobStatus"]["waitingReason"]
    assert reason.startswith("1 job ahead in virtual cluster 'default'; behind ")  # 'next' waits; 'big' runs


def test_a_job_that_can_never_fit_is_refused(daemon: Api) -> None:
    r = daemon.submit(v1("toobig", "true", cpuNumber=64))
    assert r.status_code == 400
    assert r.json()["code"] == "NoEnoughQuotaError"
    assert "needs 64 CPU" in r.json()["message"]
    r = daemon.submit(v1("toomany", "true", taskNumber=3, cpuNumber=4))
    assert r.status_code == 400 and "gang" in r.json()["message"]
    assert daemon.http.get("/api/v2/jobs").json() == []


def test_non_gang_tasks_start_as_they_fit(daemon: Api) -> None:
    job = json.loads(v1("nogang", "sleep 0.5", taskNumber=3, cpuNumber=4))
    job["extras"] = {"gangAllocation": False}
    name = daemon.submit_ok(json.dumps(job))
    wait_for(
        lambda: [t["taskState"] for t in daemon.tasks(daemon.detail(name))].count("RUNNING") == 2,
        10,
        "two of the tasks to run",
    )
    states = sorted(t["taskState"] for t in daemon.tasks(daemon.detail(name)))
    assert states == ["RUNNING", "RUNNING", "WAITING"]
    assert daemon.wait(name)["jobStatus"]["state"] == "SUCCEEDED"


def test_failing_job_reports_exit_code_and_trigger(daemon: Api) -> None:
    name = daemon.submit_ok(v1("fails", "echo bad; exit 3"))
    d = daemon.wait(name)
    s = d["jobStatus"]
    assert s["state"] == "FAILED" and s["appExitCode"] == 3
    assert s["appExitTriggerTaskRoleName"] == "main" and s["appExitTriggerTaskIndex"] == 0
    assert s["appExitSpec"]["phrase"] == "PAIRuntimeUnknownFailed"


def test_a_failure_without_a_reason_quotes_its_logs_last_line(daemon: Api) -> None:
    """A command that exits 1 gave ``main[0] failed:  (exit code 1)``: the reason was in its log, which the
    diagnosis now quotes (stderr's last line, else the whole log's; control characters dropped, bounded)."""
    said = daemon.submit_ok(v1("no-module", "echo starting; python3 -c 'import tensorboard_not_here'; echo never"))
    s = daemon.wait(said)["jobStatus"]
    quoted = "the log's last line: ModuleNotFoundError: No module named 'tensorboard_not_here'"
    assert s["state"] == "FAILED" and s["appExitDiagnostics"] == f"main[0] failed: {quoted} (exit code 1)"
    task = daemon.tasks(daemon.detail(said))[0]
    assert task["containerExitDiagnostics"] == quoted
    out = daemon.submit_ok(v1("stdout-only", "printf 'step 1\\n\\033[31mloss is nan\\033[0m\\n\\n'; exit 2"))
    assert daemon.wait(out)["jobStatus"]["appExitDiagnostics"] == (
        "main[0] failed: the log's last line: [31mloss is nan[0m (exit code 2)"
    )
    long = daemon.submit_ok(v1("long-line", "printf '%0500d\\n' 0 >&2; exit 1"))
    line = daemon.tasks(daemon.wait(long))[0]["containerExitDiagnostics"]
    assert line == "the log's last line: " + "0" * 299 + "…"


def test_min_succeeded_ends_the_job_early_and_stops_the_rest(daemon: Api) -> None:
    job = json.loads(
        v1(
            "early",
            'if [ "$PAI_TASK_INDEX" = 0 ]; then exit 0; else sleep 30; fi',
            taskNumber=3,
            minSucceededTaskCount=1,
        )
    )
    name = daemon.submit_ok(json.dumps(job))
    d = daemon.wait(name, timeout=15)
    assert d["jobStatus"]["state"] == "SUCCEEDED"
    # the other two end after their stop grace period
    wait_for(
        lambda: all(t["taskState"] in FINAL for t in daemon.tasks(daemon.detail(name))), 15, "the stopped tasks to end"
    )
    states = sorted(t["taskState"] for t in daemon.tasks(daemon.detail(name)))
    assert states == ["STOPPED", "STOPPED", "SUCCEEDED"]


def test_min_failed_null_lets_the_job_succeed_despite_failures(daemon: Api) -> None:
    name = daemon.submit_ok(v1("tolerant", 'exit "$PAI_TASK_INDEX"', taskNumber=2, minFailedTaskCount=None))
    assert daemon.wait(name)["jobStatus"]["state"] == "SUCCEEDED"


def test_retry_count_makes_new_attempts_with_history(daemon: Api) -> None:
    job = json.loads(v1("retry", "echo attempt; exit 5"))
    job["retryCount"] = 2
    name = daemon.submit_ok(json.dumps(job))
    d = daemon.wait(name)
    assert d["jobStatus"]["state"] == "FAILED" and d["jobStatus"]["retries"] == 2
    attempts = daemon.http.get(f"/api/v2/jobs/{name}/job-attempts").json()
    assert [a["attemptIndex"] for a in attempts] == [2, 0, 1]  # OpenPAI's order: the latest, then from the first
    assert [a["isLatest"] for a in attempts] == [True, False, False]
    assert all(a["state"] == "FAILED" and a["exitCode"] == 5 for a in attempts)
    assert "attempt" in daemon.log(name, attempt=0)


def test_stop_kills_the_whole_tree_and_leaves_no_orphan(daemon: Api) -> None:
    name = daemon.submit_ok(v1("stopme", "sleep 1000 & sleep 1000 & echo $$ > pgid; wait"))
    daemon.wait(name, ("RUNNING",))
    task_dir = next(daemon.home.rglob("*~stopme")) / "a0.main-0.t0"
    wait_for((task_dir / "handle.json").is_file, 10, "the task's handle")
    pid = int(json.loads((task_dir / "handle.json").read_text())["id"])  # the shim leads the task's group

    def started() -> list[psutil.Process] | None:
        members = [p for p in psutil.process_iter() if _pgid(p.pid) == pid]
        return members if len(members) >= 3 else None

    group = wait_for(started, 10, "the shim, the shell and its two sleeps in one process group")
    assert len(group) >= 3
    assert daemon.stop(name).status_code == 202
    d = daemon.wait(name, timeout=10)
    assert d["jobStatus"]["state"] == "STOPPED"
    assert daemon.tasks(d)[0]["taskState"] == "STOPPED"
    wait_for(lambda: not [p for p in group if _alive(p)], 10, "every process of the task's group to end")


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pgid(pid: int) -> int | None:
    import os

    try:
        return os.getpgid(pid)
    except OSError:
        return None


def test_stop_a_waiting_job(daemon: Api) -> None:
    daemon.submit_ok(v1("hog", "sleep 2", cpuNumber=8))
    waiting = daemon.submit_ok(v1("waits", "true", cpuNumber=8))
    assert daemon.stop(waiting).status_code == 202
    d = daemon.wait(waiting, timeout=5)
    assert d["jobStatus"]["state"] == "STOPPED"
    assert daemon.tasks(d)[0]["taskState"] == "STOPPED"


def test_max_run_time_stops_the_job_with_a_reason(daemon: Api) -> None:
    job = json.loads(v1("limited", "sleep 60"))
    job["extras"] = {"maxRunTimeMinutes": 0.02}
    name = daemon.submit_ok(json.dumps(job))
    d = daemon.wait(name, timeout=10)
    assert d["jobStatus"]["state"] == "STOPPED"
    assert "max run time" in d["jobStatus"]["appExitDiagnostics"]


def test_oom_fails_the_task_with_a_diagnostic(daemon: Api) -> None:
    cmd = 'python3 -c "b = bytearray(400 * 1024 * 1024); import time; time.sleep(2)"'
    name = daemon.submit_ok(v1("oom", cmd, memoryMB=128, shmMB=64))
    d = daemon.wait(name, timeout=30)
    assert d["jobStatus"]["state"] == "FAILED"
    task = daemon.tasks(d)[0]
    assert task["containerExitDiagnostics"].startswith("out of memory")
    assert task["containerExitSpec"]["phrase"] == "UserContainerDockerOOMKilled"


def test_delete_removes_a_finished_job_and_its_files(daemon: Api) -> None:
    name = daemon.submit_ok(v1("gone", "echo bye"))
    running = daemon.submit_ok(v1("busy", "sleep 30"))
    daemon.wait(name)
    job_dir = next(daemon.home.rglob("*~gone"))
    assert daemon.http.delete(f"/api/v2/jobs/{running}").status_code == 409
    assert daemon.http.delete(f"/api/v2/jobs/{name}").status_code == 200
    assert daemon.http.get(f"/api/v2/jobs/{name}").status_code == 404
    assert not job_dir.exists()
    # the name is free again
    daemon.submit_ok(v1("gone", "true"))


def test_parameters_and_secrets_are_rendered(daemon: Api) -> None:
    job = """
protocolVersion: 2
name: rendered
type: job
parameters: {epochs: 3}
secrets: {key: s3cr3t}
prerequisites:
  - {name: img, type: dockerimage, uri: busybox}
  - {name: ds, type: data, uri: [/data/a, /data/b]}
taskRoles:
  main:
    dockerImage: img
    data: ds
    resourcePerInstance: {cpu: 1, memoryMB: 128, gpu: 0}
    commands:
      - echo "epochs=<% $parameters.epochs %> data=<% $data.uri[1] %> keylen=$(printf '<% $secrets.key %>' | wc -c)"
      - echo 'unknown=<% $parameters.nope %>' "env=$epochs"
"""
    name = daemon.submit_ok(job)
    assert daemon.wait(name)["jobStatus"]["state"] == "SUCCEEDED"
    out = daemon.log(name, name="stdout")
    assert "epochs=3 data=/data/b keylen=6" in out
    # a job with secrets goes through OpenPAI's runtime pass, which renders an unknown name empty
    assert "unknown= env=3" in out
    config = daemon.http.get(f"/api/v2/jobs/{name}/config").text
    assert "s3cr3t" not in config and "******" in config
