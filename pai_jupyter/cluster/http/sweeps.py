"""Sweeps in the daemon (docs/sweeps.md): the metrics a job reports, and each sweep's state document.

- ``GET /api/v2/local/jobs/{user}~{job}/reports``: ``{"reports": [{time, step, metrics, source}]}``, the reports
  posted for the job, those its tasks wrote to ``run/reports.jsonl`` (``common/reports.py``) and the scalars of
  their TensorBoard event files in ``run/tensorboard`` (``common/tfevents.py``), all read through safeio
  (bounded), oldest first. ``POST`` ``{"metrics": {...}, "step": n}`` stores one with the job.
- ``GET /api/v2/local/reports?job=user~a&job=user~b``: ``{"reports": {"user~a": [...]}}``, the same of several jobs
  in one request (the Lab's Sweeps page reads its live trials so); a job the caller cannot see is left out.
- ``GET /api/v2/local/sweeps``: the user's sweeps (name, revision, updated, status; ``?state=1`` adds each one's
  state document, so one request reads them all); ``GET``, ``PUT``
  (``{"state": {...}, "revision": n, "tag": ["user~job"]}``: 409 unless ``revision`` is the stored one, 0 for a
  new sweep; the jobs in ``tag``, the caller's own, are tagged ``sweep:{name}``) and
  ``DELETE /api/v2/local/sweeps/{user}~{name}``.

The same bearer auth as every route (an application token included); a user sees only their own jobs and sweeps.
"""

from __future__ import annotations

import re
from typing import Any

from ...common import reports as rep
from ..core.errors import BadRequest, ConflictJobError, NoJobError, NotFoundError
from ..core.jobreports import job_reports
from ..core.store import now_ms
from ..core.store import sweeps as table
from .base import Base, Route

SWEEP = r"/api/v2/local/sweeps/([^/~]+)~([^/]+)"
NAME = re.compile(r"[A-Za-z0-9_-]{1,100}")  # a trial is the job {sweep}-{n}
MAX_STATE = 8 * 1024 * 1024  # a sweep's state document
MAX_JOBS = 1000  # in one request for several jobs' reports


class SweepBase(Base):
    async def prepare(self) -> None:
        await super().prepare()
        table.ensure_tables(self.cluster.store)


class Reports(SweepBase):
    def get(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        self.write_json({"reports": job_reports(self.cluster.store, row["id"], row["attempt"])})

    def post(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        body = self.json_body()
        try:
            report: table.Report = {
                "time": now_ms(),
                "step": rep.check_step(body.get("step")),
                "metrics": rep.check_metrics(body.get("metrics")),
            }
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        table.add_reports(self.cluster.store, row["id"], [report])
        if self.cluster.state.tracker is not None:  # and into the job's MLflow run
            self.cluster.state.tracker.metrics(row["id"], report["step"], report["metrics"], report["time"])
        self.write_json({"message": f"reported for {row['user']}~{row['name']}", **report}, 201)


def _summary(row: table.SweepRow) -> dict[str, Any]:
    state = row["state"]
    return {
        "user": row["user"],
        "name": row["name"],
        "revision": row["revision"],
        "updated": row["updated"],
        "status": state.get("status"),
        "trials": len(state.get("trials") or []),
    }


class ManyReports(SweepBase):
    def get(self) -> None:
        jobs = self.get_arguments("job")
        if len(jobs) > MAX_JOBS:
            raise BadRequest(f"at most {MAX_JOBS} jobs in one request")
        found: dict[str, list[dict[str, Any]]] = {}
        for job in dict.fromkeys(jobs):
            user, _, name = job.partition("~")
            try:
                row = self.own_job(user, name)
            except NoJobError:  # missing, or not the caller's
                continue
            found[f"{row['user']}~{row['name']}"] = job_reports(self.cluster.store, row["id"], row["attempt"])
        self.write_json({"reports": found})


class Sweeps(SweepBase):
    def get(self) -> None:
        rows = table.sweeps(self.cluster.store, self.user["name"])
        with_state = self.get_argument("state", "") == "1"
        self.write_json({"sweeps": [{**_summary(r), "state": r["state"]} if with_state else _summary(r) for r in rows]})


class Sweep(SweepBase):
    def _owner(self, user: str, name: str) -> None:
        if user != self.user["name"] and not self.is_admin:
            raise NotFoundError(f"sweep {user}~{name} was not found")
        if not NAME.fullmatch(name):
            raise BadRequest("a sweep's name is 1 to 100 of A-Z a-z 0-9 _ -")

    def get(self, user: str, name: str) -> None:
        self._owner(user, name)
        row = table.sweep(self.cluster.store, user, name)
        if row is None:
            raise NotFoundError(f"sweep {user}~{name} was not found")
        self.write_json({**_summary(row), "state": row["state"]})

    def put(self, user: str, name: str) -> None:
        self._owner(user, name)
        if self.cluster.store.user(user) is None:
            raise NotFoundError(f"user {user} was not found")
        if len(self.request.body) > MAX_STATE:
            raise BadRequest(f"a sweep's state is at most {MAX_STATE} bytes")
        body = self.json_body()
        state, revision, tag = body.get("state"), body.get("revision", 0), body.get("tag", [])
        if not isinstance(state, dict) or not isinstance(revision, int) or isinstance(revision, bool):
            raise BadRequest('the body must be {"state": {...}, "revision": <int>, "tag": ["user~job", ...]}')
        if not isinstance(tag, list) or not all(isinstance(j, str) and "~" in j for j in tag):
            raise BadRequest('"tag" is a list of job ids (user~job)')
        trials = [self.own_job(*job.split("~", 1)) for job in tag]  # the caller's own, else 404
        new = table.put_sweep(self.cluster.store, user, name, state, revision)
        if new is None:
            raise ConflictJobError(f"sweep {user}~{name} was written by another driver (not at revision {revision})")
        for row in trials:  # the trials are ordinary jobs, tagged with their sweep
            self.cluster.store.add_tag(row["id"], f"sweep:{name}")
        if self.cluster.state.tracker is not None:  # and children of its MLflow run
            self.cluster.state.tracker.sweep(user, name, [row["id"] for row in trials], state)
        self.write_json({"revision": new})

    def delete(self, user: str, name: str) -> None:
        self._owner(user, name)
        if not table.delete_sweep(self.cluster.store, user, name):
            raise NotFoundError(f"sweep {user}~{name} was not found")
        self.write_json({"message": f"sweep {user}~{name} deleted"})


def routes(job: str, args: dict[str, Any]) -> list[Route]:
    return [
        (job + r"/reports", Reports, args),
        (r"/api/v2/local/reports", ManyReports, args),
        (r"/api/v2/local/sweeps", Sweeps, args),
        (SWEEP, Sweep, args),
    ]
