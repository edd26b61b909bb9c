"""The Slurm backend's task-writable files (docs/security.md): a task runs on its node as its user's account and
owns its ``run/`` and its attempt's rendezvous dir, where its wrapper writes ``placement`` and ``usage`` and its
shim the logs and ``exit_code``, all of which the root daemon reads. On the real two-node cluster, four tasks of a
non-owner replace every one of those files while the daemon is down (so that its first look finds them): one with
symlinks (to the daemon's ``runtime.json``, the admin token, and to root-only decoys shaped like each file), one
with FIFOs (a blocking read would hang the daemon), one with 4 GB sparse files, one with a placement naming a false
IP. The restarted daemon follows none, blocks on none, reads each boundedly, records nothing of them (each task's
node and IP are Slurm's), and the job still stops and is deleted properly. Before, a task that replaced its
placement before the daemon read it stayed WAITING while it ran, or had the IP it wrote recorded and probed."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from pai_jupyter.cluster.paths import read_runtime
from pai_jupyter.cluster.runtime.slurm.commands import FINAL as FINAL_SLURM
from tests.helpers.daemon import Api, account_of, start_daemon, v1
from tests.helpers.privsep import DECOY_TEXT, plant_job, root_only, served_everything

from ..polling import wait_for
from ..slurm.fixture import node_addrs

pytestmark = [pytest.mark.slurm]
KINDS = ("link", "fifo", "huge", "forged")  # task index -> what it plants
DECOYS = {  # each shaped like the file it stands for, so that a daemon that read it would record it
    "placement": "n9 6.6.6.6 7\n",
    "usage": "4242.5 4242424242\n",
    "exit_code": "42\n",
    "text": DECOY_TEXT,
}
TOKEN_LINKS = ("stdout", "all", "service-tensorboard.missing")  # the link plants to runtime.json
TEXT_LINKS = ("stderr", "runtime", "service-tensorboard.log", "service-tensorboard.pid")
GROWTH_MB = 64  # the daemon's peak resident memory may grow this much, not by a planted file's 4 GB


def _attack(runtime_json: Path, decoys: dict[str, Path]) -> str:
    plants = [(name, decoys[name]) for name in ("placement", "usage", "exit_code")]
    plants += [(name, runtime_json) for name in TOKEN_LINKS] + [(name, decoys["text"]) for name in TEXT_LINKS]
    lines = [
        f"kind=$(echo {' '.join(KINDS)} | cut -d' ' -f$((PAI_TASK_INDEX + 1)))",
        'run=$PAI_TASK_DIR/run rdv=$(dirname "$PAI_TASK_DIR")/slurm-a0/rdv',
        # again while it fails: the task's own wrapper rewrites run/usage every 2 s, between the rm and the plant
        'plant() { for _ in 1 2 3 4 5; do rm -f "$1"; case $kind in link) ln -s "$2" "$1" ;; fifo) mkfifo "$1" ;; '
        'huge) truncate -s 4G "$1" ;; esac && return; done; return 1; }',
        # past the rendezvous; a peer still counting its files there would wait for ever on one replaced now
        'touch "$rdv/.through.$PAI_TASK_INDEX"',
        'if [ "$kind" = forged ]; then echo "n1 6.6.6.6 7" >"$run/placement"; else',
        *(f'plant "$run/{name}" {target}' for name, target in plants),
        f'until [ "$(ls -A "$rdv" | grep -c \'^\\.through\\.\')" -ge {len(KINDS)} ]; do sleep 0.1; done',
        f'plant "$rdv/main.$PAI_TASK_INDEX" {runtime_json}',
        "fi",
        "touch planted",  # (in its work dir: its stdout is planted over too)
        "sleep 300",
    ]
    return "\n".join(lines)


def _tasks(api: Api, job: str) -> list[dict[str, object]]:
    return api.tasks(api.detail(job))


def _placed(api: Api, job: str) -> list[tuple[object, object]]:
    return [(t["containerNodeName"], t["containerIp"]) for t in _tasks(api, job)]


def _everything(api: Api, job: str) -> str:
    """What the daemon serves of the job: its logs, services, metrics, detail and the job list."""
    served = [served_everything(api, job, indices=(0, 1, 2))]
    for path in (f"/api/v2/local/jobs/{job}/metrics", f"/api/v2/jobs/{job}", "/api/v2/local/jobs"):
        r = api.http.get(path)
        assert r.status_code == 200, r.text
        served.append(r.text)
    return "\n".join(served)


def _clean(served: str, token: str) -> None:
    assert token not in served
    for marker in ("6.6.6.6", "4242", "decoy"):
        assert marker not in served, marker


def _peak_rss(home: Path) -> int:
    """The daemon's peak resident memory so far (VmHWM): a file read whole and freed again still shows."""
    info = read_runtime(home)
    assert info is not None
    status = Path(f"/proc/{info['pid']}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) << 10


@root_only
def test_a_slurm_task_cannot_make_root_follow_block_on_or_read_all_of_its_files(slurm: Api, tmp_path: Path) -> None:
    runtime_json = slurm.home / "local" / "runtime.json"
    decoys = {name: tmp_path / f"decoy-{name}" for name in DECOYS}
    for name, path in decoys.items():
        path.write_text(DECOYS[name])
        path.chmod(0o600)
    bob = slurm.new_user("slurmplant")
    # the job waits in Slurm's queue behind one that fills both nodes; the daemon goes down meanwhile
    filler = subprocess.run(
        ["sbatch", "--parsable", "-n4", "-c1", "--mem-per-cpu=100", "-o", "/dev/null", "--wrap=sleep 300"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    job = bob.submit_ok(plant_job("plant", _attack(runtime_json, decoys), instances=len(KINDS)))
    wait_for(lambda: "pending in Slurm" in str(bob.detail(job)["jobStatus"]["waitingReason"]), 60, "Slurm to hold it")
    info = read_runtime(slurm.home)
    assert info is not None
    os.kill(info["pid"], signal.SIGKILL)
    subprocess.run(["scancel", filler], check=True)
    job_dir = slurm.home / "local" / "jobs" / job
    marks = [job_dir / f"a0.main-{i}.t0" / "work" / "planted" for i in range(len(KINDS))]
    try:
        wait_for(
            lambda: all(m.exists() for m in marks), 90, lambda: f"every task to plant its files ({_slurm_queue()})"
        )
    except AssertionError:  # its Slurm job would hold the module's cluster for the next tests (5 minutes)
        subprocess.run(["scancel", "--user", account_of(slurm.home, "slurmplant").pw_name], check=False)
        raise
    assert all(m.stat().st_uid != 0 for m in marks)  # the tasks ran as the user's own account
    # the daemon's first look at the tasks' files is now
    again = start_daemon(slurm.home, runtime="slurm")
    before = _peak_rss(slurm.home)  # (its watchers read exit_code every 50 ms, placement until a true one)
    bob = again.as_user(bob.token)
    running = lambda: all(t["taskState"] == "RUNNING" for t in _tasks(bob, job)) or None  # noqa: E731
    wait_for(running, 60, lambda: f"every task to run (Slurm's word after a false placement): {_tasks(bob, job)}")
    addrs = node_addrs()
    for node, ip in _placed(bob, job):  # the node's own address, or none where Slurm does not say which node
        assert addrs.get(str(node)) == ip or (ip == "" and str(node).startswith("n")), (node, ip, addrs)
    _clean(_everything(bob, job), again.token)
    assert _peak_rss(slurm.home) - before < GROWTH_MB << 20
    # the job still ends properly: stopped (the FIFO as exit_code holds its shim until Slurm kills it), deleted
    assert bob.stop(job).status_code == 202
    detail = bob.wait(job, timeout=90)
    assert detail["jobStatus"]["state"] == "STOPPED", detail
    ended = bob.tasks(detail)
    assert [t["taskState"] for t in ended] == ["STOPPED"] * len(KINDS), ended
    assert all(t["containerExitCode"] != 42 for t in ended), ended
    assert bob.http.delete(f"/api/v2/jobs/{job}").status_code == 200
    wait_for(lambda: not job_dir.exists(), 30, "the job's directory to go")
    for name, path in decoys.items():
        st = path.stat()
        assert path.read_text() == DECOYS[name] and (st.st_uid, st.st_mode & 0o777) == (0, 0o600), name
    assert again.token in runtime_json.read_text()


def _slurm_queue() -> str:
    """What Slurm runs and holds (for a failure's message: a job of an earlier test may still hold the nodes)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %j %T %R"], capture_output=True, text=True)
    return "squeue: " + ("; ".join(out.stdout.split("\n")).strip("; ") or "empty") + out.stderr.strip()


def _slurm_state(slurm_id: str) -> str:
    done = subprocess.run(["squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%T"], capture_output=True, text=True)
    return done.stdout.strip() or "gone"


@root_only
def test_a_slurm_task_that_writes_its_exit_status_early_does_not_run_on(slurm: Api) -> None:
    """``run/exit_code`` is the task account's file: a task that writes ``0`` there and runs on was recorded as
    ended while its Slurm job kept running, past any stop or max run time the daemon enforces. Now the end of the
    last task of a Slurm job is recorded once Slurm says that job ended, and one still running a few seconds after
    all its tasks' exit status is cancelled first. A job whose tasks end as they say is not cancelled."""
    bob = slurm.new_user("slurmearly")
    honest = bob.submit_ok(v1("honest", "echo done", taskNumber=2))
    detail = bob.wait(honest, timeout=60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail
    honest_id = str(bob.tasks(detail)[0]["containerId"])
    ended = wait_for(lambda: (s := _slurm_state(honest_id)) in FINAL_SLURM and s, 30, "Slurm to end the job")
    assert ended == "COMPLETED"  # by itself: not cancelled
    loop = 'echo 0 >"$PAI_TASK_DIR/run/exit_code"; while :; do touch alive; sleep 0.2; done'
    job = bob.submit_ok(v1("early", loop, taskNumber=2))
    detail = bob.wait(job, timeout=60)
    assert detail["jobStatus"]["state"] == "SUCCEEDED", detail  # the exit status the tasks gave stands
    slurm_id = str(bob.tasks(detail)[0]["containerId"])
    work = [slurm.home / "local" / "jobs" / job / f"a0.main-{i}.t0" / "work" for i in (0, 1)]
    assert all((w / "alive").exists() for w in work)  # the loops ran
    uid = str(account_of(slurm.home, "slurmearly").pw_uid)

    def left() -> str:  # the account's processes, on either node (their namespaces are the network's only)
        return subprocess.run(["ps", "-o", "pid,etime,cmd", "-u", uid], capture_output=True, text=True).stdout

    # before: the loops ran on (RUNNING in Slurm) for as long as the test cared to look
    wait_for(lambda: len(left().splitlines()) == 1, 10, lambda: f"the task's processes to be gone: {left()}")
    assert _slurm_state(slurm_id) in FINAL_SLURM, _slurm_state(slurm_id)
    said = " ".join(str(t["containerExitDiagnostics"]) for t in bob.tasks(detail))
    assert f"Slurm job {slurm_id} still ran" in said and "cancelled" in said, said
