"""P24 preemption: the signal -> the job queued again as its next attempt (docs/queue.md, "Preemption"), on a real
daemon with the process runtime. An admin preempts a running job by hand (``POST .../preempt``: the same path the
scheduler takes), and the clock runs until the job's detail shows its next attempt. Two commands: one that ignores
the signal, so it takes the whole grace and SIGKILL (the figure, against grace + 1 s), and one that exits on it
(the note: what the daemon itself adds)."""

from __future__ import annotations

import json
import time

from .common import Daemon, Figure, median

GRACE_S = 2.0
ROUNDS = 5
IGNORES = "trap '' TERM; while true; do sleep 0.05; done"  # (its sleep inherits the ignored signal)
EXITS = "trap 'exit 143' TERM; while true; do sleep 0.05; done"


def _requeues(command: str) -> list[float]:
    """Seconds from each preemption to the job's next attempt, ``ROUNDS`` times."""
    with Daemon("p24", cpus=2) as d:
        (d.home / "local").mkdir(parents=True, exist_ok=True)
        role = {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": command}
        doc = {
            "jobName": "victim",
            "image": "img",
            "taskRoles": [role],
            "extras": {"preemption": {"graceSeconds": GRACE_S}},
        }
        job = d.submit(json.dumps(doc))
        out = []
        for attempt in range(ROUNDS):
            _wait_attempt(d, job, attempt, running=True)
            time.sleep(0.2)  # (its command has set its trap)
            t0 = time.perf_counter()
            r = d.http.post(f"/api/v2/local/jobs/{job}/preempt", json={"reason": "bench"})
            r.raise_for_status()
            _wait_attempt(d, job, attempt + 1, running=False)
            out.append(time.perf_counter() - t0)
        d.http.put(f"/api/v2/jobs/{job}/executionType", json={"value": "STOP"})
        return out


def _wait_attempt(d: Daemon, job: str, attempt: int, running: bool, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status = d.http.get(f"/api/v2/jobs/{job}").json()["jobStatus"]
        if status["attemptId"] == attempt and (not running or status["state"] == "RUNNING"):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{job} never reached attempt {attempt}: {status}")
        time.sleep(0.005)


def p24_preempt_to_requeued() -> Figure:
    fig = Figure("P24", "preemption signal -> job queued again", "s", f"<= grace + 1 s ({GRACE_S + 1:g} s)")
    ignores, exits = _requeues(IGNORES), _requeues(EXITS)
    fig.value, fig.baseline = median(ignores), GRACE_S
    fig.ratio = fig.value / GRACE_S
    fig.judge(lambda f: f.value is not None and f.value <= GRACE_S + 1)
    fig.note = (
        f"median of {ROUNDS} preemptions of a command that ignores SIGTERM (SIGKILL after its {GRACE_S:g} s grace); "
        f"one that exits on it is queued again in {median(exits) * 1000:.0f} ms (median); baseline: the grace"
    )
    return fig
