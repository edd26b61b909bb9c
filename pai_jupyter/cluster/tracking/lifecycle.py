"""Tracking in the daemon's life (docs/tracking.md): at its start the tracker on the site's server
(``--mlflow-uri``) or on the cluster's own, started or taken over; that server started again when it exited; at its
stop, the updates under way sent and the server stopped."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..paths import runtime_file, write_private_json
from .server import LOOPBACK, SERVICE_USER, EmbeddedServer, installed
from .site import SITE_PREFIX, site_admin, site_url
from .tracker import Tracker, TrackingConfig

if TYPE_CHECKING:
    from ..core.service import Cluster
    from ..runtime.base import Runtime

log = logging.getLogger("pai_jupyter.cluster")


def start_tracking(cluster: Cluster, local: Path, runtime: Runtime, args: argparse.Namespace) -> EmbeddedServer | None:
    """The tracker that makes each job a run, per ``--mlflow``: on a site's server (``--mlflow-uri``), else on the
    cluster's own, started (or found running from before) and returned; None when there is no server of ours.
    ``on`` without what it needs, or a site given wrongly, stops the daemon."""
    mode = args.mlflow
    if mode == "off":
        return None
    if args.mlflow_uri:
        try:
            url = site_url(args.mlflow_uri)
            admin = site_admin(Path(args.mlflow_credentials).expanduser()) if args.mlflow_credentials else None
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
        key = EmbeddedServer(local).secrets()["users_key"].encode()
        cluster.state.tracker = Tracker(cluster.store, TrackingConfig(url, url, admin, key, prefix=SITE_PREFIX))
        log.info(
            "every job is an MLflow run on the site's server %s (%s)",
            url,
            "accounts pai-<user>" if admin else "no authentication",
        )
        return None
    missing = installed()
    if missing is not None:
        if mode == "on":
            raise SystemExit(f"--mlflow on: tracking cannot start: {missing}")
        log.info("jobs are not tracked in MLflow: %s", missing)
        return None
    # where tasks run on other hosts, the server listens where they reach this host (the nodes' network) instead
    host = next(iter(runtime.listen_addresses()), LOOPBACK)
    server = EmbeddedServer(
        local, run_as=lambda: cluster.state.accounts.run_as(SERVICE_USER), host=host, avoid=runtime.ports().span
    )
    url = server.start()
    users_key = server.secrets()["users_key"].encode()
    cluster.state.tracker = Tracker(cluster.store, TrackingConfig(url, url, server.admin(), users_key))
    return server


async def restart_tracking(cluster: Cluster, server: EmbeddedServer, about: dict[str, Any], home: Path) -> None:
    """The MLflow server exited: start it again (at its port when that is free; runtime.json says where)."""
    log.warning("the MLflow tracking server exited (see local/mlflow-server.log); starting it again")
    server.reap()
    url = await asyncio.to_thread(server.start)
    if cluster.state.tracker is not None:
        await cluster.state.tracker.moved(url)
    if about.get("mlflow") != url:
        about["mlflow"] = url
        cluster.space.with_room(lambda: write_private_json(runtime_file(home), about))


async def stop_tracking(cluster: Cluster, server: EmbeddedServer | None) -> None:
    tracker = cluster.state.tracker
    if tracker is not None:
        try:  # the updates under way get their chance
            await asyncio.wait_for(tracker.drain(), timeout=15)
        except TimeoutError:
            log.warning("MLflow updates still pending when the daemon stopped were dropped")
        await tracker.close()
    if server is not None:
        await asyncio.to_thread(server.stop)
