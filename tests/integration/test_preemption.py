"""The issue's scenario on a real daemon of 2 CPUs and 2 (fake) GPUs with the process runtime: a crit job waiting
behind an oppo job preempts it (the oppo job's command gets its signal, waits again as its next attempt and runs
once there is room), a user at their quota waits with the reason shown while others run, and two users of one
class alternate by fair share where plain FIFO would run one user's jobs first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pai_jupyter.cluster import control
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1
from tests.polling import wait_for

pytestmark = pytest.mark.slow

TRAP = (  # a command that says what it got: its checkpoint dir gets the signal's name, then it exits as killed by it
    "trap 'echo TERM >> \"$PAI_CHECKPOINT_DIR/signals\"; exit 143' TERM; "
    'echo "attempt start" >> "$PAI_CHECKPOINT_DIR/signals"; while true; do sleep 0.1; done'
)


def job(name: str, command: str, *, cls: str | None = None, gpu: int = 0, cpu: int = 1, **extras: Any) -> str:
    doc = json.loads(v1(name, command, gpuNumber=gpu, cpuNumber=cpu))
    if cls:
        extras["hivedScheduler"] = {"jobPriorityClass": cls}
    doc["extras"] = extras
    return json.dumps(doc)


def daemon(home: Path, config: dict[str, Any]) -> Api:
    (home / "local").mkdir(parents=True, exist_ok=True)
    (home / "local" / "cluster.yaml").write_text(yaml.safe_dump(config))
    return start_daemon(home, cpus=2, memory_mb=4096, gpus=2)


@pytest.fixture
def cluster_home(pai_home: Path):  # type: ignore[no-untyped-def]
    yield pai_home
    control.stop(pai_home)
    kill_leftovers(pai_home)


def test_a_crit_job_waiting_behind_an_oppo_job_preempts_it_and_the_oppo_job_runs_again(cluster_home: Path) -> None:
    admin = daemon(cluster_home, {"preemption": {"graceSeconds": 5}})
    alice, bob = admin.new_user("alice"), admin.new_user("bob")
    spare = alice.submit_ok(job("spare", TRAP, cls="oppo", gpu=2))
    alice.wait(spare, ("RUNNING",))
    ckpt = cluster_home / "local" / "jobs" / spare / "output" / "checkpoints"
    wait_for(lambda: (ckpt / "signals").exists(), 30, "the oppo job's command to start")
    assert bob.http.post(f"/api/v2/local/jobs/{spare}/preempt", json={}).status_code == 403  # only an admin
    assert alice.http.post(f"/api/v2/local/jobs/{spare}/preempt", json={}).status_code == 403  # its owner neither
    urgent = bob.submit_ok(job("urgent", "echo urgent ran", cls="crit", gpu=1))
    done = bob.wait(urgent, timeout=60)["jobStatus"]
    assert done["state"] == "SUCCEEDED"
    print(f"crit job: submitted -> started {(done['launchedTime'] - done['submissionTime']) / 1000:.2f} s")
    # the oppo job got SIGTERM, ended its attempt, and waits again (or already runs again) as attempt 1
    assert (ckpt / "signals").read_text().splitlines()[:2] == ["attempt start", "TERM"]
    detail = wait_for(lambda: (d := alice.detail(spare))["jobStatus"]["attemptId"] == 1 and d, 30, "attempt 1")
    status = detail["jobStatus"]
    assert status["retries"] == 0  # being preempted is not a retry
    first = alice.http.get(f"/api/v2/jobs/{spare}/job-attempts/0").json()
    said = first["appExitDiagnostics"]
    assert first["exitCode"] == -1003 and said.startswith("preempted by bob~urgent: a crit job needs 1 GPU"), first
    assert (
        said.endswith("its tasks get SIGTERM, SIGKILL 5 s later")
        and first["exitPhrase"] == "PodPreemptedForCriticalPod"
    )
    assert (
        first["attemptCompletedTime"] <= done["launchedTime"]
    )  # the crit job started on the room the oppo job gave back
    alice.wait(spare, ("RUNNING",), timeout=60)  # and the oppo job runs again once the crit job is done
    wait_for(lambda: (ckpt / "signals").read_text().count("attempt start") == 2, 30, "attempt 1's command")
    alice.stop(spare)


def test_a_user_at_their_quota_waits_with_the_reason_while_another_user_runs(cluster_home: Path) -> None:
    admin = daemon(cluster_home, {"userQuota": {"gpu": 1}})
    alice, bob = admin.new_user("alice"), admin.new_user("bob")
    first = alice.submit_ok(job("first", "sleep 600", gpu=1))
    alice.wait(first, ("RUNNING",))
    second = alice.submit_ok(job("second", "true", gpu=1))
    theirs = bob.submit_ok(job("theirs", "sleep 600", gpu=1))
    bob.wait(theirs, ("RUNNING",), timeout=30)  # the GPU alice may not take goes to bob
    reason = alice.detail(second)["jobStatus"]["waitingReason"]
    assert reason == "alice is at their quota in virtual cluster 'default': 1 of 1 GPU in use, this job needs 1"
    line = alice.http.get("/api/v2/local/queue").json()["virtualClusters"]["default"]
    assert [(j["name"], j["waitingReason"]) for j in line] == [("second", reason)]
    alice.stop(first)
    assert alice.wait(second, timeout=60)["jobStatus"]["state"] == "SUCCEEDED"
    bob.stop(theirs)


@pytest.mark.parametrize("half_life_hours", [1, 0], ids=["fair-share", "fifo"])
def test_two_users_of_one_class_alternate_by_fair_share(cluster_home: Path, half_life_hours: float) -> None:
    """Each job takes both CPUs, so one runs at a time. Alice submits her three first; bob's run a little longer
    (so the users' usage never ties). With fair share they alternate, each next job going to the user with less
    recent use; with it off (half-life 0) the line is FIFO."""
    admin = daemon(cluster_home, {"fairShare": {"halfLifeHours": half_life_hours}})
    alice, bob = admin.new_user("alice"), admin.new_user("bob")
    hold = admin.submit_ok(job("hold", "sleep 600", cpu=2))  # the users' jobs all queue behind it
    admin.wait(hold, ("RUNNING",))
    jobs = [alice.submit_ok(job(f"a{i}", "sleep 1", cpu=2)) for i in range(3)]
    jobs += [bob.submit_ok(job(f"b{i}", "sleep 1.5", cpu=2)) for i in range(3)]
    admin.stop(hold)
    done = {j: admin.wait(j, timeout=120)["jobStatus"] for j in jobs}
    started = sorted(jobs, key=lambda j: done[j]["launchedTime"])
    order = [j.split("~")[1] for j in started]
    t0 = done[started[0]]["launchedTime"]
    print("start order:", ", ".join(f"{j} +{(done[j]['launchedTime'] - t0) / 1000:.1f}s" for j in started))
    assert order == (["a0", "b0", "a1", "b1", "a2", "b2"] if half_life_hours else ["a0", "a1", "a2", "b0", "b1", "b2"])


SAYS = (  # says which signal it got, in its log and its checkpoint dir, after a moment's work (its "save")
    'trap \'sleep 0.3; echo "got $PAI_PREEMPT_SIGNAL"; echo "$PAI_PREEMPT_SIGNAL" > "$PAI_CHECKPOINT_DIR/got"; '
    'exit 0\' "$PAI_PREEMPT_SIGNAL"; echo started; while true; do sleep 0.1; done'
)


@pytest.mark.parametrize("runtime", ["process", "docker"])
def test_a_jobs_own_preemption_signal_reaches_its_command_and_the_task_keeps_its_logs(
    runtime: str, request: pytest.FixtureRequest
) -> None:
    """USR2 on the process runtime (the C shim blocks it for itself), USR1 in a container (the sh shim and its tees
    ignore it): the command gets it and saves, and the task's log and exit status are whole."""
    api: Api = request.getfixturevalue("daemon" if runtime == "process" else "docker_daemon")
    sig = "USR2" if runtime == "process" else "USR1"
    spare = api.submit_ok(job("spare", SAYS, preemption={"graceSeconds": 10, "signal": sig}))
    api.wait(spare, ("RUNNING",))
    wait_for(lambda: "started" in api.log(spare, attempt=0), 60, "the command to start")
    r = api.http.post(f"/api/v2/local/jobs/{spare}/preempt", json={"reason": "a test"})
    assert r.status_code == 200, r.text
    wait_for(lambda: api.detail(spare)["jobStatus"]["attemptId"] == 1, 60, "attempt 1")
    ckpt = api.home / "local" / "jobs" / spare / "output" / "checkpoints"
    assert (ckpt / "got").read_text().strip() == sig
    assert api.log(spare, attempt=0).splitlines()[-1] == f"got {sig}"  # logged after the signal: no tee died
    first = api.http.get(f"/api/v2/jobs/{spare}/job-attempts/0").json()
    task = first["taskRoles"]["main"]["taskStatuses"][0]
    assert task["containerExitCode"] == 0, task  # the command's own status: no shim's part died of the signal
    assert f"get SIG{sig}, SIGKILL 10 s later" in first["appExitDiagnostics"]
    api.stop(spare)


SAVES_LATE = (  # not exec'd: bash dies of SIGTERM at once; python saves 6 s later, past the shim's usual 5 s drain
    "python3 -c 'import signal, time, os\n"
    "signal.signal(signal.SIGTERM, lambda *a: None)\n"
    'open(os.environ["PAI_CHECKPOINT_DIR"] + "ready", "w").close()\n'
    "signal.pause(); time.sleep(6)\n"
    'open(os.environ["PAI_CHECKPOINT_DIR"] + "saved", "w").close()\''
)


def test_a_command_under_the_scripts_shell_has_the_whole_grace_to_save(daemon: Api) -> None:
    spare = daemon.submit_ok(job("spare", SAVES_LATE, preemption={"graceSeconds": 20}))
    ckpt = daemon.home / "local" / "jobs" / spare / "output" / "checkpoints"
    wait_for(lambda: (ckpt / "ready").exists(), 60, "the command to start")
    assert daemon.http.post(f"/api/v2/local/jobs/{spare}/preempt", json={}).status_code == 200
    wait_for(lambda: daemon.detail(spare)["jobStatus"]["attemptId"] == 1, 60, "attempt 1")
    assert (ckpt / "saved").exists()  # the attempt ended after its command saved, not when its shell died
    daemon.stop(spare)
