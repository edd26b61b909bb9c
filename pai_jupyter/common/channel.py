"""The channel between a client on this machine and the local daemon: its unix socket (``local/api.sock``).

The daemon serves its REST API on a loopback TCP port, and there a packet capture on ``lo`` (a process with
``CAP_NET_RAW`` in the host's network namespace: a container with host networking and Docker's default
capabilities did it) reads every bearer token in clear. So the daemon also listens on a unix socket, which no
capture reads, and announces it in ``runtime.json`` as ``socket``. A client sends the requests for the daemon's
url over it: the URLs stay ``http://127.0.0.1:PORT/...`` (log locations, redirects, what the daemon answers), only
the bytes take the socket. A daemon of an older version announces none: then TCP, as before. One that announces
a socket is reached only through it (never TCP as a fallback: that would put the token back on ``lo``).
The TCP port stays for what cannot use the socket: OpenPAI's own clients, a task in a container, a tunnel.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx

SOCKET_NAME = "api.sock"  # in the daemon's local/ directory
MAX_SUN_PATH = 107  # bytes of a unix socket's path (sockaddr_un.sun_path holds 108, with the NUL)

_dirs: dict[str, int] = {}
_dirs_lock = threading.Lock()


def announced(info: Mapping[str, Any]) -> str | None:
    """The socket a ``runtime.json`` (or a profile) names, else None (a daemon of an older version: TCP)."""
    path = info.get("socket")
    return path if isinstance(path, str) and path else None


def connectable(path: str | Path) -> str:
    """``path`` as ``bind``/``connect`` take it. A path longer than ``sun_path`` (a deep home) is reached through
    its directory, opened once and kept open: ``/proc/self/fd/N/api.sock``."""
    path = str(path)
    if len(os.fsencode(path)) <= MAX_SUN_PATH:
        return path
    parent, name = os.path.split(path)
    with _dirs_lock:
        fd = _dirs.get(parent)
        if fd is None:
            fd = _dirs[parent] = os.open(parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{name}"


def origin(url: str) -> tuple[str, str]:
    """(scheme, host:port) of a URL, lowercased, a websocket's as its server's: two URLs of one server compare
    equal."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return {"ws": "http", "wss": "https"}.get(scheme, scheme), parts.netloc.lower()


def transport(path: str) -> httpx.HTTPTransport:
    """An httpx transport that sends every request over the unix socket at ``path``."""
    import httpx

    return httpx.HTTPTransport(uds=connectable(path))


def async_transport(path: str) -> httpx.AsyncHTTPTransport:
    import httpx

    return httpx.AsyncHTTPTransport(uds=connectable(path))


def http_client(info: Mapping[str, Any], timeout: float = 30.0) -> httpx.Client:
    """An ``httpx.Client`` for the daemon a ``runtime.json`` describes, with its token (``base_url`` its url): over
    its socket when it announces one (and no proxy from the environment: none reaches a unix socket), else over
    TCP. For the few callers that speak to the daemon with the owner's token directly (``pai cluster``, the
    start-up probe, ``make demo``, tests); the product's client routes by itself (``client/base.py``)."""
    import httpx

    path = announced(info)
    headers = {"Authorization": f"Bearer {info['token']}"}
    if path is None:
        return httpx.Client(base_url=str(info["url"]), headers=headers, timeout=timeout)
    over = transport(path)
    return httpx.Client(base_url=str(info["url"]), headers=headers, timeout=timeout, transport=over, trust_env=False)
