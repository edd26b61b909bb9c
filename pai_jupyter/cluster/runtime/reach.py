"""Where the machines a runtime runs tasks on reach this host: its own address on the route to each of them.

A batch system's nodes are other hosts: what runs in a task and calls back (a JupyterHub user's server, to the
daemon's REST and the Hub's API) cannot use this host's loopback. The address it can use is the one this host
sends from towards the node, which the kernel's routing table says: a UDP socket ``connect``ed to the node's
address (no packet is sent) names it. That is the nodes' network only, never every interface (``0.0.0.0``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable


def source_address(host: str) -> str | None:
    """This host's address on its route to ``host`` (a name or an address); None when it has no route to it or
    the name does not resolve."""
    try:
        found = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)
    except OSError:
        return None
    for family, kind, proto, _, addr in found:
        with socket.socket(family, kind, proto) as s:
            try:
                s.connect(addr)
            except OSError:
                continue
            return str(s.getsockname()[0])
    return None


def toward(hosts: Iterable[str]) -> list[str]:
    """This host's addresses on the routes to ``hosts``, each once, in order, less loopback (a node on this very
    host reaches it there already), unspecified and link-local ones (which need a scope to be bound)."""
    out: list[str] = []
    for host in hosts:
        addr = source_address(host)
        if addr is None or addr in out:
            continue
        ip = ipaddress.ip_address(addr.split("%")[0])
        if not (ip.is_loopback or ip.is_unspecified or ip.is_link_local):
            out.append(addr)
    return out
