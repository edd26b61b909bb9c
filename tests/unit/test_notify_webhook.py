"""Where a user's webhook may send the root daemon (cluster/core/webhook.py): what each address is judged, and DNS
rebinding: the name is looked up once and the POST goes to the address that was vetted, under the URL's name."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import psutil
import pytest
from tornado.netutil import Resolver

from pai_jupyter.cluster.core.notify import Notifier
from pai_jupyter.cluster.core.store import Store
from pai_jupyter.cluster.core.webhook import AddrInfo, LocalWebhookError, VettingResolver, own_addresses, why_not_public

PUBLIC = "93.184.216.34"  # a global address: never connected to here (Internet below stands in for it)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback (127.0.0.1)"),  # Python 3.11: is_loopback is False for it
        ("::ffff:7f00:1", "loopback (127.0.0.1)"),
        ("::7f00:1", "loopback (127.0.0.1)"),  # IPv4-compatible
        ("2002:7f00:1::", "loopback (127.0.0.1)"),  # 6to4
        ("64:ff9b::7f00:1", "loopback (127.0.0.1)"),  # NAT64
        ("0.0.0.0", "unspecified: this machine"),
        ("::ffff:0.0.0.0", "unspecified: this machine (0.0.0.0)"),
        ("::", "unspecified: this machine"),
        ("169.254.169.254", "link-local"),  # a cloud's metadata service
        ("fe80::1", "link-local"),
        ("10.0.0.1", "private"),
        ("172.17.0.1", "private"),  # Docker's bridge gateway
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("::ffff:10.0.0.1", "private (10.0.0.1)"),
        ("100.64.0.1", "not a public address"),  # shared address space (carrier NAT)
        ("240.0.0.1", "private"),
        ("224.0.0.1", "multicast"),
        ("64:ff9b:1::a00:1", "a local-use NAT64 address"),
        (PUBLIC, None),
        ("::ffff:" + PUBLIC, None),
        ("64:ff9b::" + PUBLIC, None),
        ("2606:2800:220:1:248:1893:25c8:1946", None),
    ],
)
def test_each_address_is_judged_by_where_it_leads(address: str, why: str | None) -> None:
    assert why_not_public(ipaddress.ip_address(address), set()) == why


def test_the_hosts_own_addresses_are_refused_public_or_not() -> None:
    public = ipaddress.ip_address(PUBLIC)
    assert why_not_public(public, {public}) == "an address of this machine"
    mapped = ipaddress.ip_address("::ffff:" + PUBLIC)
    assert why_not_public(mapped, {public}) == f"an address of this machine ({PUBLIC})"
    listed = {a.address.split("%")[0] for x in psutil.net_if_addrs().values() for a in x if a.family == socket.AF_INET}
    assert {str(a) for a in own_addresses()} >= listed and "127.0.0.1" in listed


class Listener:
    """An HTTP server on 127.0.0.1 that keeps the POSTs it gets (path, Host header, body)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str, dict[str, Any]]] = []
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                posts.append((self.path, self.headers["Host"], body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    local, public = Listener(), Listener()
    yield local, public
    local.close()
    public.close()


class Internet(Resolver):
    """Stands in for the network beyond this machine: the vetting resolver's answers are kept, and a public address
    it let through is reached at ``public_port`` on 127.0.0.1 (the test's stand-in for that host)."""

    def initialize(self, vetting: VettingResolver, public_port: int) -> None:
        self.vetting, self.public_port = vetting, public_port
        self.answers: list[AddrInfo] = []

    async def resolve(self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC) -> AddrInfo:
        vetted = await self.vetting.resolve(host, port, family)
        self.answers.append(vetted)
        return [(socket.AF_INET, ("127.0.0.1", self.public_port)) for _ in vetted]


def test_a_rebinding_name_is_looked_up_once_and_posted_to_the_address_vetted(
    listeners: tuple[Listener, Listener],
) -> None:
    """A name that answers a public address first and 127.0.0.1 after (DNS rebinding): the check and the
    connection used two lookups, so the POST went to the local service. Now: one lookup, the POST reaches the
    public host (here: its stand-in) with the URL's name as its Host, the local service gets nothing."""
    local, public = listeners
    looked_up: list[str] = []

    async def rebinding(host: str, port: int, family: int) -> AddrInfo:
        looked_up.append(host)
        return [(socket.AF_INET, (PUBLIC if len(looked_up) == 1 else "127.0.0.1", port))]

    internet = Internet(VettingResolver(rebinding), public.port)
    notifier = Notifier(cast(Store, None), resolver=internet)
    url = f"http://hooks.example.org:{local.port}/pai"
    asyncio.run(notifier.post(url, {"state": "SUCCEEDED"}, guard=True))
    assert looked_up == ["hooks.example.org"]  # once: the connection used the answer that was vetted
    assert internet.answers == [[(socket.AF_INET, (PUBLIC, local.port))]]
    assert public.posts == [("/pai", f"hooks.example.org:{local.port}", {"state": "SUCCEEDED"})]
    with pytest.raises(LocalWebhookError, match=r"hooks.example.org is 127.0.0.1: loopback"):
        asyncio.run(Notifier(cast(Store, None), resolver=internet).post(url, {"state": "FAILED"}, guard=True))
    assert looked_up == ["hooks.example.org"] * 2 and len(public.posts) == 1
    assert local.posts == []


def test_a_name_with_one_local_address_among_public_ones_is_refused(listeners: tuple[Listener, Listener]) -> None:
    local, public = listeners

    async def mixed(host: str, port: int, family: int) -> AddrInfo:
        return [(socket.AF_INET, (PUBLIC, port)), (socket.AF_INET6, ("::ffff:127.0.0.1", port, 0, 0))]

    notifier = Notifier(cast(Store, None), resolver=Internet(VettingResolver(mixed), public.port))
    with pytest.raises(LocalWebhookError, match=r"is ::ffff:127.0.0.1: loopback \(127.0.0.1\)"):
        asyncio.run(notifier.post(f"http://mixed.example.org:{local.port}/", {}, guard=True))
    assert local.posts == public.posts == []
