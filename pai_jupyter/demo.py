"""``make demo``: the quickstart, headless. Validates the example jobs, runs two of them on the embedded
cluster, and prints their states and logs. A cluster already running is used as it is; one the demo had to start
is stopped again at the end. The ps / worker example gets as many workers (at most its 2) as the cluster's CPUs
hold beside its ps, so it runs on a 2-CPU machine too."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from .cluster import control
from .common import channel
from .common.states import FINAL, JobState
from .notebook.display import stopped_note
from .protocol import Job, JobValidationError

JOBS = Path(__file__).resolve().parent.parent / "notebooks" / "jobs"
RUN = ("quickstart.yaml", "distributed-ps-worker.yaml")


def main() -> int:
    print("== validating the example jobs")
    ok = True
    for path in sorted(JOBS.iterdir()):
        try:
            job = Job.from_file(path)
        except JobValidationError as exc:
            ok = False
            print(f"{path.name}: invalid\n{exc}")
            continue
        print(f"{path.name}: ok\n  " + job.summary().replace("\n", "\n  "))
    info = control.running()
    started = info is None
    if info is None:
        print("\n== starting the embedded cluster (for this demo; stopped again at the end)")
        info = control.start(runtime=os.environ.get("PAI_DEMO_RUNTIME", "process"))
    else:
        print("\n== using the embedded cluster that is already running (left as it is)")
    print(f"local cluster at {info['url']} (runtime {info['runtime']})")
    try:
        ok = _run_jobs(info) and ok
    finally:
        if started:
            control.stop()
    if started:
        print(
            "\nThe demo's cluster was stopped (its jobs and logs stay); `make lab` or `pai cluster start` starts "
            "one that schedules this machine's CPUs and memory."
        )
    else:
        print("\nThe cluster keeps running, as it was; stop it with: .venv/bin/pai cluster stop")
    return 0 if ok else 1


def _run_jobs(info: dict[str, Any]) -> bool:
    """Submit each example, print its states, and each task's end and log; True when all SUCCEEDED."""
    ok = True
    http = channel.http_client(info)
    suffix = time.strftime("%H%M%S")
    cpus = int(http.get("/api/v2/info").json()["capacity"]["cpu"])
    for file in RUN:
        doc = fit_workers(yaml.safe_load((JOBS / file).read_text()), cpus)
        name = doc["name"] = f"{doc['name']}_{suffix}"
        r = http.post(
            "/api/v2/jobs", content=yaml.safe_dump(doc, sort_keys=False), headers={"Content-Type": "text/yaml"}
        )
        if r.status_code != 202:
            print(f"submit {file}: {r.status_code} {r.json().get('message')}")
            ok = False
            continue
        job_id = f"{r.json()['username']}~{name}"
        print(f"\n== {job_id} submitted")
        state, last = "", ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            d = http.get(f"/api/v2/jobs/{job_id}").json()
            state = d["jobStatus"]["state"]
            if state != last:
                reason = d["jobStatus"].get("waitingReason")
                print(f"  state {state}" + (f" ({reason})" if reason else ""))
                last = state
            if state in FINAL:
                break
            time.sleep(0.2)
        status = d["jobStatus"]
        for role, rs in d["taskRoles"].items():
            for t in rs["taskStatuses"]:
                why = t.get("containerExitDiagnostics") or stopped_note(
                    state, t["taskState"], status.get("appExitDiagnostics")
                )
                print(
                    f"  {role}[{t['taskIndex']}] {t['taskState']} exit {t['containerExitCode']} "
                    f"ports {t['containerPorts'] or '-'}" + (f" ({why})" if why else "")
                )
                logs = http.get(t["containerLog"] + "?tail-mode=true").json()["locations"]
                text = http.get(next(loc["uri"] for loc in logs if loc["name"] == "all")).text
                print("    | " + text.rstrip().replace("\n", "\n    | "))
        ok = ok and state == JobState.SUCCEEDED
    return ok


def fit_workers(doc: dict[str, Any], cpus: int) -> dict[str, Any]:
    """A v2 job document whose ``worker`` role has no more instances than ``cpus`` hold beside the other roles
    (at least one; its ``minSucceededInstances`` follows), so the example fits a small cluster at once."""
    roles = doc.get("taskRoles", {})
    worker = roles.get("worker")
    if not worker:
        return doc
    others = sum(r["instances"] * r["resourcePerInstance"]["cpu"] for n, r in roles.items() if n != "worker")
    fit = max(1, (cpus - others) // worker["resourcePerInstance"]["cpu"])
    if worker["instances"] > fit:
        print(f"({doc['name']}: {fit} worker(s) instead of {worker['instances']}: the cluster has {cpus} CPUs)")
        worker["instances"] = fit
        if (worker.get("completion") or {}).get("minSucceededInstances"):
            worker["completion"]["minSucceededInstances"] = fit
    return doc


if __name__ == "__main__":
    sys.exit(main())
