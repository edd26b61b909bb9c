"""The client's channel to a daemon on this machine (``common/channel.py``): every request for the daemon's url goes
over its unix socket, however deep its home (a path longer than a socket address holds), and nothing else does."""

from __future__ import annotations

import asyncio
import json
import socketserver
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter.client import AsyncClient, Client, ServerInfo, ServerUnavailable
from pai_jupyter.client.profiles import Profile
from pai_jupyter.common import channel

URL = "http://127.0.0.1:9"  # nothing listens there: a request that went over TCP fails


class Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]]

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        body = json.dumps({"name": "over the socket"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:  # (its default names the client's address: a unix socket has none)
        pass


@pytest.fixture
def daemon_socket(tmp_path: Path) -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "local"
    deep.mkdir(parents=True)
    path = str(deep / channel.SOCKET_NAME)
    assert len(path) > channel.MAX_SUN_PATH  # the socket's path alone could not be bound or connected to
    seen: list[tuple[str, str | None]] = []
    handler = type("Handler", (Recorder,), {"seen": seen})
    server = socketserver.ThreadingUnixStreamServer(channel.connectable(path), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield path, seen
    server.shutdown()
    server.server_close()


def starter(path: str | None) -> Any:
    return lambda home, *, start: {"url": URL, "token": "t0k", "socket": path}


def test_the_local_profile_sends_its_requests_over_the_announced_socket(daemon_socket: Any) -> None:
    path, seen = daemon_socket
    with Client(starter=starter(path), retries=0) as client:
        assert client.info().name == "over the socket"
        assert client.socket_for(f"{URL}/x") == path and client.socket_for("http://127.0.0.1:10/x") is None
        assert client.socket_for("ws://127.0.0.1:9/terminal") == path  # the terminal websocket too

    async def async_info() -> ServerInfo:
        async with AsyncClient(starter=starter(path), retries=0) as client:
            return await client.info()

    assert asyncio.run(async_info()).name == "over the socket"
    assert seen == [("/api/v2/info", "Bearer t0k")] * 2


def test_a_profile_names_the_socket_of_another_accounts_daemon(daemon_socket: Any) -> None:
    path, seen = daemon_socket
    profile = Profile(name="shared", url=URL, username="bob", token="b0b", socket=path)
    with Client(profile, retries=0) as client:
        assert client.info().name == "over the socket"
    assert seen == [("/api/v2/info", "Bearer b0b")]


def test_a_daemon_without_a_socket_is_reached_over_tcp_and_a_given_transport_wins(daemon_socket: Any) -> None:
    path, seen = daemon_socket
    with Client(starter=starter(None), retries=0) as client, pytest.raises(ServerUnavailable):
        client.info()  # an older daemon announces no socket: TCP, where nothing answers here
    import httpx

    mock = httpx.MockTransport(lambda r: httpx.Response(200, json={"name": "mock"}))
    with Client(starter=starter(path), retries=0, transport=mock) as client:
        assert client.info().name == "mock"
    assert seen == []
