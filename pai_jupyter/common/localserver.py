"""A helper server this process starts on 127.0.0.1 (a TensorBoard for a notebook, or for an ended task under
the Jupyter server): a free port for it, whether it serves there yet, and tying it to its parent so it never
outlives the process that asked for it. The notebook and the server extension both start such servers and must not
import each other, so this lives here. Also the port of a server whose clients keep its address across its restarts
(the daemon's MLflow server, the Hub's internal ports): ``lasting_port``, ``bindable``."""

from __future__ import annotations

import contextlib
import ctypes
import random
import signal
import socket
from pathlib import Path

EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
LASTING_FLOOR = 10000  # below: the well-known services' ports (5432, 6379, 8080, 8888...)


def free_port() -> int:
    """A loopback port no one listens on now (the kernel's pick for a bind to port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ephemeral_span(path: Path = EPHEMERAL) -> tuple[int, int]:
    """The ports this host's kernel gives a bind to port 0 and an outgoing connection (Linux's
    ``ip_local_port_range``; elsewhere the IANA range)."""
    try:
        first, last = (int(part) for part in path.read_text().split())
        return first, last
    except (OSError, ValueError):
        return 49152, 65535


def bindable(host: str, port: int) -> bool:
    """Can a server (SO_REUSEADDR: its own connections' TIME_WAITs do not count) bind ``port`` on ``host`` now?"""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def lasting_port(host: str, avoid: tuple[int, int] | None = None, ephemeral: tuple[int, int] | None = None) -> int:
    """A free port for a server that must come back at the same address after it exits (clients keep its URL):
    outside the range the kernel draws ephemeral ports from, where any program's bind to port 0 or outgoing
    connection could take it while the server restarts, and outside ``avoid`` (the task ports' range). Above that
    range first (Linux leaves 61000-65535), where task port ranges and Kubernetes' NodePorts (30000-32767) are not;
    then below it, down to LASTING_FLOOR. Falls back to the kernel's pick when nothing outside is free."""
    low, high = ephemeral or ephemeral_span()
    pick = random.Random()
    for first, last in ((high + 1, 65535), (LASTING_FLOOR, low - 1)):
        for _ in range(100 if first <= last else 0):
            port = pick.randint(first, last)
            if (avoid is None or not avoid[0] <= port <= avoid[1]) and bindable(host, port):
                return port
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def serves(pid: int, port: int) -> bool:
    """Does process ``pid`` itself listen on ``port``? A port ``free_port`` found free may be taken by another
    process before the helper binds it (its start then fails), and a check that something answers there would
    take that other process for the helper: a request meant for it, and its token, would go there."""
    import psutil  # (here: the notebook's %load_ext imports this module and stays light)

    try:
        conns = psutil.Process(pid).net_connections("tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns)


def die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the process (thread) that started it ends, even by SIGKILL."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
