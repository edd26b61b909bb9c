"""The lease a kernel's job holds from its Jupyter server, so that a server that dies does not leave it running.

On the embedded cluster the kernel's job declares ``extras["com.pai_jupyter.lease"]`` (``lease_terms``); the
daemon stops the job, with the reason, once ``seconds`` pass without a renewal (cluster/http/lease.py). The
Jupyter server renews it from a thread of its own (``LeaseKeeper``, three times per lease), so a busy or blocked
event loop does not lose the kernel; killed with -9, it renews no more and the job is STOPPED within the lease.
A remote OpenPAI has no such route: there the job has no lease and ends when the kernel is shut down or culled.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..client.errors import JobConflict, JobNotFound, NotSupported, PaiError

REASON = "its Jupyter server stopped renewing the kernel's lease"


def lease_terms(seconds: float) -> dict[str, Any]:
    """The job's ``extras["com.pai_jupyter.lease"]``."""
    return {"seconds": seconds, "reason": REASON}


class LeaseKeeper:
    """Renews one job's lease every ``seconds / 3`` from a daemon thread until ``stop()`` or the job ends."""

    def __init__(self, profile: str | None, job_id: str, seconds: float, log: logging.Logger | Any) -> None:
        self.profile, self.job_id, self.period, self.log = profile, job_id, seconds / 3, log
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pai-lease-{job_id}", daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        from ..client import Client

        with Client(self.profile) as client:
            warned = False
            while not self._stopped.wait(self.period):
                try:
                    client.renew_lease(self.job_id)
                    warned = False
                except (JobConflict, JobNotFound, NotSupported) as exc:  # the job ended, or this cluster has no leases
                    self.log.info("PAI kernel job %s: its lease is no longer renewed: %s", self.job_id, exc)
                    return
                except PaiError as exc:  # the cluster may answer again before the lease lapses
                    if not warned:
                        self.log.warning("PAI kernel job %s: renewing its lease failed: %s", self.job_id, exc)
                    warned = True
