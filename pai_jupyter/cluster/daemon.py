"""The embedded cluster daemon: ``python -m pai_jupyter.cluster.daemon`` (started by ``pai cluster start``).

Serves the REST API on a loopback port and on a unix socket (``local/api.sock``, where local clients send their
tokens: ``common/channel.py``), and where the runtime's tasks run on other hosts (Slurm) on this host's address
towards them too (``nodesUrl``), recovers running tasks from the database at start, checks job time limits every
second, and writes ``runtime.json`` (url, socket, admin token, pid; mode 0600) once it answers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tornado.httpserver
import tornado.netutil

from ..common.channel import connectable
from .core.notify import NotifyConfig
from .core.scheduler import Capacity, Resources, machine_resources
from .core.space import DEFAULT_FLOOR_MB
from .paths import (
    cluster_config,
    local_dir,
    lock_holder,
    make_private_dir,
    make_private_tree,
    os_user,
    pai_home,
    read_runtime,
    runtime_file,
    socket_file,
    take_daemon_lock,
    write_private_json,
)
from .runtime import auto, registry
from .runtime.base import DEFAULT_PIDS_LIMIT, Runtime
from .runtime.ports import Span, parse_span
from .tracking.lifecycle import restart_tracking, start_tracking, stop_tracking
from .tracking.reconcile import after_start
from .tracking.system import SystemMetrics
from .tracking.system import interval as system_interval

if TYPE_CHECKING:
    from .core.gpuidle import GpuIdle
    from .core.hub import HubLink
    from .core.service import Cluster
    from .http.lease import Leases
    from .tracking.server import EmbeddedServer

log = logging.getLogger("pai_jupyter.cluster")
EXIT_ANOTHER_DAEMON = 75  # another daemon holds this home's lock: `control.start` attaches to it
PRIVATE_MARK = ".private"  # in local/: everything in it was made private once (homes of older versions were not)


def claim_home(home: Path) -> tuple[Path, int]:
    """Make the home private (umask 077 for everything the daemon writes; a home left readable by an older
    version is fixed; a root daemon's home and ``local/`` passable, never listable, for its users' clients to
    reach the API socket) and take its lock: (local dir, lock fd). Exits EXIT_ANOTHER_DAEMON when another daemon
    serves this home: one daemon per home, however many starts race."""
    os.umask(0o077)
    local = local_dir(home)
    passable = 0o711 if os.geteuid() == 0 else 0o700  # a root daemon's users reach local/api.sock by name
    make_private_dir(home, passable)
    make_private_dir(local, passable)
    lock = take_daemon_lock(local)
    if lock is None:
        log.error("another daemon (pid %s) already serves %s; this one exits", lock_holder(local), home)
        raise SystemExit(EXIT_ANOTHER_DAEMON)
    marker = local / PRIVATE_MARK
    if not marker.exists():  # a home from a version that left files readable by everyone
        log.info("making everything in %s private to its owner", local)
        make_private_tree(local)
        marker.touch()
    return local, lock


def bind_api_socket(path: Path) -> socket.socket:
    """The unix socket local clients reach the API on (``common/channel.py``): connectable by every account, which
    reaches it by name where the directories above let it (a root daemon's ``local/`` is 0711); a token is still
    needed for everything but ``info`` and login. A socket left by a daemon killed with -9 is replaced (``local/``
    is the daemon's own: nothing else can have put a file there)."""
    return tornado.netutil.bind_unix_socket(connectable(path), mode=0o666)


def pick_runtime(kind: str, options: registry.Options) -> Runtime:
    """A runtime by name (``runtime/registry.py``); 'auto': Docker when the engine answers and has (or can pull)
    the examples' images, else the process runtime (``runtime/auto.py``)."""
    if kind == "auto":
        kind = auto.choose()[0]
    try:
        return registry.make(kind, options)
    except ValueError as exc:
        raise SystemExit(f"pai cluster: {exc}") from None


def configured_backend(local: Path) -> str | None:
    """``backend:`` in the cluster's config (local/cluster.yaml), when set."""
    backend = cluster_config(local).get("backend")
    return str(backend) if backend else None


def configured_task_ports(local: Path) -> Span | None:
    """``taskPorts:`` in local/cluster.yaml (``20000-29999``), when set; a wrong one stops the daemon saying why."""
    text = cluster_config(local).get("taskPorts")
    try:
        return parse_span(text) if text is not None else None
    except ValueError as exc:
        raise SystemExit(f"pai cluster: {local / 'cluster.yaml'}: {exc}") from None


def load_capacity(
    local: Path, cpus: int | None, memory_mb: int | None, gpus: int | None, runtime: Runtime | None = None
) -> Capacity:
    """The flags, else the runtime's cluster (a batch system's nodes), else this machine; quotas from the config."""
    own = runtime.resources() if runtime is not None else None
    machine = Resources(*own) if own else machine_resources()
    # each machine of a batch system's cluster, down ones too (they come back): one task must fit one of them
    nodes = [Resources(n.cpu, n.memory_mb, n.gpu) for n in (runtime.nodes() or [])] if runtime is not None else []
    total = Resources(
        cpus if cpus is not None else machine.cpu,
        memory_mb if memory_mb is not None else machine.memory_mb,
        gpus if gpus is not None else machine.gpu,
    )
    quotas: dict[str, Resources] = {}
    for name, q in (cluster_config(local).get("virtualClusters") or {}).items():
        quotas[str(name)] = Resources(
            int(q.get("cpu", total.cpu)), int(q.get("memoryMB", total.memory_mb)), int(q.get("gpu", total.gpu))
        )
    return Capacity(total=total, quotas=quotas, nodes=nodes)


def admin_token(cluster: Cluster, local: Path) -> str:
    from .core.store import OWNER

    user = os_user()
    cluster.store.ensure_user(user, admin=True)
    old = (read_runtime(local.parent) or {}).get("token")
    if isinstance(old, str) and old and cluster.store.user_for_token(old):
        return old
    return cluster.store.new_token(user, OWNER)


def listen_for_nodes(runtime: Runtime, host: str, port: int, sockets: list[socket.socket]) -> str | None:
    """A daemon on loopback whose runtime runs tasks on other hosts (Slurm's nodes) also listens, on the same
    port, at this host's address on the route to each node (``Runtime.listen_addresses``: the nodes' network,
    never every interface), where a task on a node reaches its REST; the first such URL, else None."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None  # (the admin chose where it listens)
    urls = []
    for address in runtime.listen_addresses():
        try:
            sockets.extend(tornado.netutil.bind_sockets(port, address=address))
        except OSError as exc:
            log.warning("not listening for the nodes at %s:%d: %s", address, port, exc)
            continue
        urls.append(f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}")
    if urls:
        log.info("the REST API also listens for the runtime's nodes at %s", ", ".join(urls))
    return urls[0] if urls else None


def build_cluster(args: argparse.Namespace, local: Path) -> tuple[Cluster, str]:
    """The cluster of this home, on the runtime chosen (and why it was: ``runtimeChoice``)."""
    from .core.service import Cluster
    from .core.sharing import Sharing

    try:
        cluster_config(local)  # read once here: a file that is no YAML mapping stops the daemon, saying so
    except ValueError as exc:
        raise SystemExit(f"pai cluster: {exc}") from None
    ports = configured_task_ports(local)
    options = registry.Options(args.memory_enforcement, args.cpu_limits, local / "warm", args.pids_limit, ports)
    kind, why = auto.explain(args.runtime if args.runtime != "auto" else None, configured_backend(local))
    runtime = pick_runtime(kind, options)
    cluster = Cluster(
        local,
        runtime,
        load_capacity(local, args.cpus, args.memory_mb, args.gpus, runtime),
        stop_grace=args.stop_grace,
        min_free_mb=args.min_free_mb,
        notify=NotifyConfig.load(local, args.smtp, args.mail_from, args.notify_webhook),
        sharing=Sharing.load(local),
    )
    return cluster, why


def describe(
    cluster: Cluster, url: str, api_socket: Path, token: str, why: str, nodes_url: str | None
) -> dict[str, Any]:
    """What runtime.json says of the running daemon (read by `pai cluster start`/`status` and the clients)."""
    tracking = cluster.state.tracker
    return {
        "url": url,
        "socket": str(api_socket),  # where local clients send their tokens (common/channel.py)
        "token": token,
        "pid": os.getpid(),
        "user": os_user(),
        "runtime": cluster.runtime.describe(),
        "runtimeChoice": why,  # `pai cluster start` and `status` say it
        **({"nodesUrl": nodes_url} if nodes_url else {}),  # the REST as a node's task reaches it (docs/hub.md)
        **({"mlflow": tracking.config.url} if tracking is not None else {}),  # where jobs are runs (docs/tracking.md)
        "started": time.time(),
    }


async def tick(
    cluster: Cluster,
    leases: Leases,
    hub: HubLink,
    idle_gpus: GpuIdle | None,
    tracking: tuple[EmbeddedServer | None, dict[str, Any], Path],
) -> None:
    """The daemon's clock, once a second: deadlines and leases; every few seconds lost tasks, the disk reserve,
    the tracking server (``tracking``: it, runtime.json's content, the home), system metrics, idle GPUs; the Hub
    link. A chore that fails is logged, never fatal."""
    mlflow, about, home = tracking
    every = system_interval() if cluster.state.tracker is not None else 0
    system = SystemMetrics(cluster) if every else None
    seconds = 0
    while True:
        await asyncio.sleep(1.0)
        seconds += 1
        try:
            cluster.check_deadlines()
            leases.expire()
            if seconds % 5 == 0:
                cluster.watch_lost()  # a task that ended with its end unrecorded (recovery.watch_lost)
            if seconds % 30 == 0:
                cluster.space.keep_reserve()  # space came back: hold a reserve again
            if mlflow is not None and seconds % 5 == 0 and not mlflow.alive():
                await restart_tracking(cluster, mlflow, about, home)
            if system is not None and seconds % every == 0:
                system.start()
            if idle_gpus is not None and seconds % int(idle_gpus.config.every_seconds) == 0:
                await idle_gpus.check()
            hub.tick()
        except Exception:
            log.exception("deadline check failed")


async def serve(args: argparse.Namespace) -> None:
    from .core.gpuidle import gpu_idle
    from .core.hub import HubLink
    from .http.app import make_app
    from .http.lease import Leases

    home = Path(args.home).expanduser() if args.home else pai_home()
    local, _lock = claim_home(home)  # held (open) until the process exits
    cluster, why = build_cluster(args, local)
    runtime = cluster.runtime
    cluster.space.at_start()
    token = cluster.space.with_room(lambda: admin_token(cluster, local))
    sockets = tornado.netutil.bind_sockets(args.port, address=args.host)
    port = sockets[0].getsockname()[1]
    nodes_url = listen_for_nodes(runtime, args.host, port, sockets)
    api_socket = socket_file(home)
    sockets.append(bind_api_socket(api_socket))
    leases = Leases(cluster)
    hub = HubLink(cluster, local)  # a JupyterHub's users as platform users, once local/hub.yaml names one
    server = tornado.httpserver.HTTPServer(make_app(cluster, leases, hub), idle_connection_timeout=3600)
    server.add_sockets(sockets)
    cluster.recover()
    mlflow = start_tracking(cluster, local, runtime, args)
    tracking = cluster.state.tracker
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{port}"
    about = describe(cluster, url, api_socket, token, why, nodes_url)
    cluster.space.with_room(lambda: write_private_json(runtime_file(home), about))
    log.info(
        "pai_jupyter local cluster at %s (runtime %s: %s; capacity %s)",
        url,
        runtime.describe(),
        why,
        cluster.capacity.total.describe(),
    )
    runtime.begin()
    idle_gpus = gpu_idle(cluster, local)  # None unless cluster.yaml's gpuIdle turns it on
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ticker = asyncio.ensure_future(tick(cluster, leases, hub, idle_gpus, (mlflow, about, home)))
    if tracking is not None:  # runs whose updates a killed daemon never sent
        settling = asyncio.ensure_future(after_start(tracking))
    await stop.wait()
    ticker.cancel()
    if tracking is not None:
        settling.cancel()
    server.stop()
    await shut_down(cluster, home, api_socket, mlflow)


async def shut_down(cluster: Cluster, home: Path, api_socket: Path, mlflow: EmbeddedServer | None) -> None:
    """After the server stopped: notifications get their chance, tracking stops, runtime.json goes (when it is
    still this process's); tasks keep running, to be re-attached at the next start."""
    try:  # what is being sent gets its chance (each delivery gives up after its own timeout)
        await asyncio.wait_for(cluster.notifier.drain(), timeout=15)
    except TimeoutError:
        log.warning("notifications still being sent when the daemon stopped were dropped")
    if cluster.state.tracker is not None:
        await stop_tracking(cluster, mlflow)
    info = read_runtime(home)
    if info and info.get("pid") == os.getpid():
        runtime_file(home).unlink(missing_ok=True)
        api_socket.unlink(missing_ok=True)
    cluster.store.close()
    cluster.runtime.close()
    log.info("daemon stopped; running tasks keep running and are re-attached at the next start")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="pai-cluster-daemon", description=__doc__)
    p.add_argument("--home", help="PAI_JUPYTER_HOME (default ~/.pai-jupyter)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument(
        "--runtime",
        "--backend",
        help=f"auto (the default; or `backend:` in local/cluster.yaml), or one of {', '.join(registry.names())}",
    )
    p.add_argument(
        "--memory-enforcement",
        choices=["auto", "cgroup", "watchdog"],
        default="auto",
        help="process runtime: how memory limits are enforced (auto: cgroup where writable)",
    )
    p.add_argument(
        "--cpu-limits",
        action="store_true",
        help="process runtime: also cap CPU with a cpu cgroup (costs ~5 ms per task start)",
    )
    p.add_argument(
        "--pids-limit",
        type=int,
        default=DEFAULT_PIDS_LIMIT,
        help="the most processes (threads too) one task may have; 0: no limit (process runtime: where a pids "
        "cgroup is writable)",
    )
    p.add_argument("--cpus", type=int)
    p.add_argument("--memory-mb", type=int)
    p.add_argument("--gpus", type=int)
    p.add_argument(
        "--min-free-mb",
        type=int,
        default=DEFAULT_FLOOR_MB,
        help="refuse submits while the disk holding the home has less free space than this (MB)",
    )
    p.add_argument(
        "--smtp",
        metavar="HOST[:PORT]",
        help="mail job notifications through this SMTP server (default: cluster.yaml's)",
    )
    p.add_argument("--mail-from", metavar="ADDR", help="the sender of notification mails (default pai@localhost)")
    p.add_argument(
        "--notify-webhook", metavar="URL", help="POST job notifications here when a job names no webhook of its own"
    )
    p.add_argument("--stop-grace", type=float, default=3.0, help="seconds between SIGTERM and SIGKILL on stop")
    p.add_argument(
        "--mlflow",
        choices=("auto", "on", "off"),
        default=os.environ.get("PAI_JUPYTER_MLFLOW", "auto"),
        help="make every job an MLflow run on the cluster's own tracking server (docs/tracking.md): auto (the "
        "default, $PAI_JUPYTER_MLFLOW) where mlflow is installed, on (refuse to start "
        "without it), off",
    )
    p.add_argument(
        "--mlflow-uri",
        default=os.environ.get("PAI_JUPYTER_MLFLOW_URI") or None,
        metavar="URL",
        help="make jobs runs on this MLflow tracking server of the site's instead of the cluster's own "
        "(default $PAI_JUPYTER_MLFLOW_URI)",
    )
    p.add_argument(
        "--mlflow-credentials",
        default=os.environ.get("PAI_JUPYTER_MLFLOW_CREDENTIALS") or None,
        metavar="FILE",
        help='with --mlflow-uri: a 0600 JSON file {"username", "password"} of an admin of the server\'s basic-auth '
        "app; users get accounts pai-<user> there (without it: a server without authentication)",
    )
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("tornado.access").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # (a line per call to the MLflow server)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
