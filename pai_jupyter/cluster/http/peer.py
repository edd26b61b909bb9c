"""Who is at the other end of a request that came over the daemon's unix socket (``local/api.sock``).

Over the socket the kernel tells the daemon the caller's account (``SO_PEERCRED``); over TCP it cannot (every
local account is 127.0.0.1). The daemon uses it where it changes something:

- the owner's token (the one ``runtime.json`` holds, 0600) presented by another account is refused and logged:
  that account can only have it because it leaked (a capture of an older version's loopback traffic, a copied
  file), and the log says who has it. Root and the owner's account may use it.
- failed logins are counted per account, not per address: one local account guessing passwords over the socket
  locks out itself, not every local user (they all share 127.0.0.1 over TCP).
- the owner's token is refused on a listener that is not loopback (the nodes' network, where the daemon listens for
  tasks on other hosts: ``nodesUrl``): the owner's own clients are on this machine, and nothing on a node ever has a
  reason to hold it.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import struct

import tornado.httputil

from ..core.errors import ForbiddenUserError
from ..core.store import OWNER, Store

log = logging.getLogger("pai_jupyter.cluster")
_UCRED = struct.Struct("3i")  # pid, uid, gid


def peer_uid(request: tornado.httputil.HTTPServerRequest) -> int | None:
    """The uid of the process that connected, when the request came over the unix socket; None over TCP."""
    stream = getattr(request.connection, "stream", None)
    sock = getattr(stream, "socket", None)
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    try:
        _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except OSError:
        return None
    return int(uid)


def client_key(request: tornado.httputil.HTTPServerRequest) -> str:
    """Whom failed logins are counted against: the account over the socket, else the address."""
    uid = peer_uid(request)
    return f"uid {uid}" if uid is not None else request.remote_ip or "?"


def from_network(request: tornado.httputil.HTTPServerRequest) -> bool:
    """The request came to a TCP listener of the daemon on an address that is not loopback."""
    sock = getattr(getattr(request.connection, "stream", None), "socket", None)
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    try:
        return not ipaddress.ip_address(str(sock.getsockname()[0]).split("%")[0]).is_loopback
    except (OSError, ValueError):
        return True


def refuse_a_leaked_owner_token(request: tornado.httputil.HTTPServerRequest, store: Store, token: str) -> None:
    """403 when another account than the daemon's (or root) presents the owner's token over the socket, or anyone
    presents it on a listener that is not loopback."""
    if from_network(request) and store.token_label(token) == OWNER:
        raise ForbiddenUserError("the cluster owner's token is accepted on this machine only (its socket, loopback)")
    uid = peer_uid(request)
    if uid is None or uid in (0, os.geteuid()) or store.token_label(token) != OWNER:
        return
    log.warning(
        "uid %d presented the cluster owner's token (runtime.json) over the local socket: refused. It has leaked: "
        "revoke it (DELETE /api/v2/tokens/<it>) and restart the daemon, which writes a new one",
        uid,
    )
    raise ForbiddenUserError("the cluster owner's token is accepted only from the owner's own account")
