"""Where a webhook that a user named in their job may send the daemon (root): public addresses of other machines.

The daemon POSTs a job's status to the job's own ``webhook``. Were that allowed to reach this machine, its link or
a private network, a user could make root talk to services that trust such callers (an admin API on 127.0.0.1, a
bridge gateway, a router). So the name is resolved once, by ``VettingResolver``, every address it resolves to is
vetted, and the HTTP client connects to exactly those addresses (the URL's name stays its ``Host`` header and TLS
server name): a name that answers a public address to a first lookup and 127.0.0.1 to a second (DNS rebinding) is
never looked up a second time. An address is refused when it, or the IPv4 address inside it (IPv4-mapped
``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, 6to4 ``2002:…``, NAT64 ``64:ff9b::…``), is loopback,
unspecified, link-local, private, shared, reserved, multicast, not globally routable, or one of this host's own
interface addresses. The webhook an admin sets for every job (``notification.webhook``) may point anywhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import psutil
from tornado.netutil import Resolver

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
AddrInfo = list[tuple[int, Any]]  # (family, sockaddr), as tornado's Resolver answers
Lookup = Callable[[str, int, int], Awaitable[AddrInfo]]
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix: the IPv4 address is the last 32 bits
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: a site's own translator, never public
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated (RFC 4291); ::1 and :: are in it too


class LocalWebhookError(RuntimeError):
    """A user's webhook points at this machine, its link or a private network: not sent."""


def embedded_ipv4(addr: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, 6to4, NAT64), which is where it leads."""
    if isinstance(addr, ipaddress.IPv4Address):
        return None
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr in NAT64 or (addr in IPV4_COMPATIBLE and int(addr) > 1):  # (:: and ::1 are themselves)
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def own_addresses() -> set[Address]:
    """This host's interface addresses now (a bridge that came up after the daemon started counts too)."""
    out: set[Address] = set()
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                try:
                    out.add(ipaddress.ip_address(entry.address.split("%")[0]))
                except ValueError:
                    continue
    return out


def why_not_public(addr: Address, own: set[Address]) -> str | None:
    """Why a user's webhook may not go to ``addr`` (None: it may). An IPv6 address that carries an IPv4 one is
    judged by the IPv4 address, where the connection ends up."""
    if isinstance(addr, ipaddress.IPv6Address) and addr in LOCAL_NAT64:
        return "a local-use NAT64 address"
    inner = embedded_ipv4(addr)
    a = inner if inner is not None else addr
    for why, bad in (
        ("loopback", a.is_loopback),
        ("unspecified: this machine", a.is_unspecified),
        ("link-local", a.is_link_local),
        ("multicast", a.is_multicast),
        ("private", a.is_private),
        ("not a public address", a.is_reserved or not a.is_global),
        ("an address of this machine", a in own or addr in own),
    ):
        if bad:
            return why if inner is None else f"{why} ({a})"
    return None


async def _getaddrinfo(host: str, port: int, family: int) -> AddrInfo:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
    return [(fam, addr) for fam, _, _, _, addr in infos]


class VettingResolver(Resolver):
    """tornado's Resolver for a user's webhook: one lookup (``lookup``: the event loop's getaddrinfo unless a
    test gives another), every address vetted, and only those handed to the HTTP client to connect to."""

    def initialize(self, lookup: Lookup | None = None) -> None:
        self.lookup = lookup or _getaddrinfo

    async def resolve(self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC) -> AddrInfo:
        try:
            infos = await self.lookup(host, port, family)
        except OSError as exc:
            raise LocalWebhookError(f"cannot resolve {host!r}: {exc}") from None
        if not infos:
            raise LocalWebhookError(f"{host!r} resolves to no address")
        own = own_addresses()
        for _, sockaddr in infos:
            text = str(sockaddr[0]).split("%")[0]
            why = why_not_public(ipaddress.ip_address(text), own)
            if why is not None:
                raise LocalWebhookError(
                    f"a job's own webhook may not point at this machine or a private network ({host} is {text}: "
                    f"{why}); the cluster's admin can set a webhook for every job (notification.webhook in "
                    "cluster.yaml)"
                )
        return infos
