"""A helper server this process starts on 127.0.0.1 (a TensorBoard for a notebook, or for an ended task under
the Jupyter server): a free port for it, whether it serves there yet, and tying it to its parent so it never
outlives the process that asked for it. The notebook and the server extension both start such servers and must not
import each other, so this lives here."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import socket


def free_port() -> int:
    """A loopback port no one listens on now (the kernel's pick for a bind to port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
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
