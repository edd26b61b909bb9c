"""``PUT /api/v2/local/jobs/{user}~{name}/lease``: renew a job's lease; a job whose lease lapses is stopped.

A job that declares ``extras["com.pai_jupyter.lease"] = {"seconds": N, "reason": "..."}`` is held by whoever
submitted it (a kernel's job by its Jupyter server) and lives only while they say so: a holder that dies (kill -9
included) stops renewing, and within N seconds (plus the daemon's one-second tick) the job is STOPPED with the
reason. The lease counts from the job's submission or the last renewal, waiting or running; renewals are kept in
memory, so a restarted daemon gives every leased job a fresh N seconds to be renewed. The job's owner or an admin
renews it; 409 once the job has ended or is stopping, or when it declares no lease.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...common.states import FINAL, LIVE_JOB
from ...protocol.rules import LEASE_KEY, lease_problem
from ..core.errors import ConflictJobError
from ..core.store import JobCore
from .base import Base, Route

if TYPE_CHECKING:
    from ..core.service import Cluster


class Leases:
    """The last renewal of each leased job (by id), and the check that stops the lapsed ones."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.started = time.time()
        self.renewed: dict[int, float] = {}

    def terms(self, row: JobCore) -> tuple[float, str] | None:
        """(seconds, reason) of the job's lease; None when it declares none (or a malformed one)."""
        lease = self.cluster.job_model(row).extras.get(LEASE_KEY)
        if lease is None or lease_problem(lease):
            return None
        return float(lease["seconds"]), str(lease.get("reason") or "its lease was not renewed")

    def renew(self, row: JobCore) -> dict[str, Any]:
        terms = self.terms(row)
        if terms is None:
            raise ConflictJobError(f"job {row['user']}~{row['name']} declares no lease (extras.{LEASE_KEY})")
        if row["state"] in FINAL or row["execution_type"] == "STOP":
            raise ConflictJobError(f"job {row['user']}~{row['name']} is {row['state']}; its lease is over")
        now = time.time()
        self.renewed[row["id"]] = now
        return {"seconds": terms[0], "expires": now + terms[0]}

    def expire(self) -> None:
        """Stop every live job whose lease lapsed (the daemon's tick calls this each second)."""
        now, live = time.time(), set()
        for state in sorted(LIVE_JOB):
            for row in self.cluster.store.jobs_in_state(state):
                terms = self.terms(row)
                if terms is None or row["execution_type"] == "STOP":
                    continue
                live.add(row["id"])
                since = max(self.renewed.get(row["id"], 0.0), row["submission_time"] / 1000, self.started)
                if now > since + terms[0]:
                    self.cluster.stop(row, f"stopped: {terms[1]} (not renewed for {terms[0]:g} s)")
        for job_id in set(self.renewed) - live:
            del self.renewed[job_id]


class Lease(Base):
    def initialize(self, cluster: Cluster, leases: Leases) -> None:  # type: ignore[override]
        super().initialize(cluster)
        self.leases = leases

    def put(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        self.write_json(self.leases.renew(row))


def routes(job: str, args: dict[str, Any], leases: Leases | None) -> list[Route]:
    return [(job + r"/lease", Lease, {**args, "leases": leases})]
