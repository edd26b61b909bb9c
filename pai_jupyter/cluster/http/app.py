"""The daemon's tornado application: every route of the OpenPAI v2 REST subset (jobs.py, logs.py, openpai.py) and
the local extensions under /api/v2/local/ (joblist.py, tasks.py, ssh.py, maxruntime.py, priority.py, users.py,
lease.py, sweeps.py, hub.py, tracking.py, usage.py), described in ``openapi.yaml``.

Handlers stay thin: authenticate, read arguments, call the Cluster, shape the answer with ``views``.
Every route needs a bearer token except login; a user sees only their own jobs (others' answer 404).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tornado.httputil
import tornado.web

from ...protocol.parse import MAX_DOCUMENT_BYTES
from ..core.errors import NoApiError
from ..core.hub import HubLink
from . import (
    hub,
    inventory,
    joblist,
    jobs,
    lease,
    logs,
    maxruntime,
    openpai,
    priority,
    ssh,
    sweeps,
    tasks,
    tracking,
    usage,
    users,
)
from .base import HUB, JOB, Base

if TYPE_CHECKING:
    from ..core.service import Cluster


class NotFound(Base):
    async def prepare(self) -> None:
        await super().prepare()
        raise NoApiError(f"API {self.request.path} is not found.")


def make_app(
    cluster: Cluster, leases: lease.Leases | None = None, hub_link: HubLink | None = None
) -> tornado.web.Application:
    """The application; ``leases``: the jobs' leases, whose lapses the daemon's tick checks; ``hub_link``: the
    JupyterHub whose tokens are taken too (core/hub.py)."""
    args = {"cluster": cluster}
    local_job = JOB.replace("/api/v2/jobs/", "/api/v2/local/jobs/")
    routes = [
        *jobs.routes(args),
        *joblist.routes(args),
        *logs.routes(args),
        *openpai.routes(args),
        *inventory.routes(args),
        *tasks.routes(local_job, args),
        *ssh.routes(local_job, args),
        *maxruntime.routes(local_job, args),
        *priority.routes(local_job, args),
        *users.routes(args),
        *lease.routes(local_job, args, leases),
        *sweeps.routes(local_job, args),
        *hub.routes(args),
        *tracking.routes(args),
        *usage.routes(args),
    ]
    settings: dict[str, Any] = {HUB: hub_link}
    return PaiApplication(
        routes,
        default_handler_class=NotFound,
        default_handler_args=args,
        compress_response=False,
        max_body_size=64 * MAX_DOCUMENT_BYTES,
        **settings,
    )


class PaiApplication(tornado.web.Application):
    """Routes match with or without a trailing slash, as OpenPAI's (Express) do: its JS SDK asks for
    ``/api/v2/users/``."""

    def find_handler(self, request: tornado.httputil.HTTPServerRequest, **kwargs: Any) -> Any:
        if len(request.path) > 1 and request.path.endswith("/"):
            request.path = request.path.rstrip("/") or "/"
        return super().find_handler(request, **kwargs)
