"""The channel between this machine's clients and the daemon: no token crosses loopback TCP.

The attack: a process with ``CAP_NET_RAW`` in the host's network namespace (a Docker task with host networking and
Docker's default capabilities did it) opens ``AF_PACKET`` on ``lo`` and reads the daemon's traffic, the admin's
bearer token with it. The daemon's local clients (the CLI, the client, the Jupyter server extension and its
terminal relay, another account's profile) talk to it over its unix socket (``common/channel.py``); this module
is the sniffer, and the socket's other uses of the caller's account (``cluster/http/peer.py``).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from pai_jupyter.client import Client
from tests.helpers.cli import pai
from tests.helpers.daemon import Api, v1
from tests.helpers.jupyter_fixture import jupyter, task_terminal
from tests.polling import wait_for

PYTHON = "/usr/bin/python3"  # what another account runs (not a pyenv shim under /root)
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(PYTHON),
    reason=f"needs root (AF_PACKET for the sniffer; another account) and {PYTHON}",
)
ETH_P_ALL = 0x0003


def tcp_payload(frame: bytes, port: int) -> bytes:
    """The TCP payload of an Ethernet frame captured on ``lo`` when it is to or from ``port``, else b""."""
    if len(frame) < 14:
        return b""
    kind = struct.unpack("!H", frame[12:14])[0]
    if kind == 0x0800 and len(frame) >= 34 and frame[23] == 6:  # IPv4, TCP
        tcp = 14 + (frame[14] & 0x0F) * 4
    elif kind == 0x86DD and len(frame) >= 54 and frame[20] == 6:  # IPv6, TCP without extension headers
        tcp = 54
    else:
        return b""
    if len(frame) < tcp + 20 or port not in struct.unpack("!HH", frame[tcp : tcp + 4]):
        return b""
    return frame[tcp + (frame[tcp + 12] >> 4) * 4 :]


class Sniffer:
    """Every TCP payload to or from ``port`` on ``lo``, captured from a thread (the attacker's AF_PACKET socket;
    only this port's: the machine's other loopback traffic is not this test's)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.1)
        self.data = bytearray()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._capture, daemon=True)
        self.thread.start()

    def _capture(self) -> None:
        while not self.done.is_set():
            try:
                frame = self.sock.recv(262144)
            except TimeoutError:
                continue
            self.data += tcp_payload(frame, self.port)

    def close(self) -> bytes:
        self.done.set()
        self.thread.join(5)
        self.sock.close()
        return bytes(self.data)


@pytest.fixture
def sniffer(daemon: Api) -> Iterator[Sniffer]:
    port = urlsplit(daemon.url).port
    assert port is not None
    sniff = Sniffer(port)
    yield sniff
    sniff.close()


def test_no_token_crosses_loopback_tcp_to_the_local_daemon(daemon: Api, sniffer: Sniffer, tmp_path: Path) -> None:
    # the capture works: a canary sent over TCP is seen (else a silent sniffer would pass this test)
    canary = f"canary-{os.getpid()}-{id(sniffer)}"
    httpx.get(f"{daemon.url}/api/v2/info", headers={"X-Canary": canary}, timeout=10)
    wait_for(lambda: canary.encode() in sniffer.data, 10, "the sniffer to see the canary on the daemon's port")
    home = daemon.home
    # the owner's CLI: a user added (the owner's token), a job submitted and waited for, listed, the status
    added = pai("cluster", "user", "add", "bob", home=home)
    assert added.returncode == 0, added.stderr
    bob = added.stdout.strip()
    assert "--socket" in added.stderr  # the profile command it prints names the socket
    job_file = tmp_path / "cli.json"
    job_file.write_text(v1("by-cli", "echo from the cli"))
    for argv in (("submit", str(job_file), "--wait"), ("jobs",), ("logs", "by-cli"), ("cluster", "status")):
        r = pai(*argv, home=home)
        assert r.returncode == 0, (argv, r.stderr)
    # the client: submit, the live log stream, a log location (a URL with its own token) and its text
    with Client() as client:
        job = client.submit(v1("by-client", "echo streamed"))
        assert "streamed" in "".join(client.follow(job))
        assert "streamed" in client.logs(job)
        sleeper = client.submit(v1("sleeper", "sleep 300"))
        client.wait(sleeper, until={"RUNNING"}, timeout=60)
    # another account's profile of this daemon: its url and the socket `pai cluster user add` printed
    other = tmp_path / "bob-home"
    (tmp_path / "bob.token").write_text(bob)
    socket_path = str(daemon.socket)
    argv = ("profile", "add", "shared", daemon.url, "-u", "bob", "--token-file", str(tmp_path / "bob.token"))
    assert pai(*argv, "--socket", socket_path, home=other).returncode == 0
    r = pai("jobs", "--profile", "shared", home=other)
    assert r.returncode == 0 and "no jobs" in r.stdout, r.stderr
    # the Jupyter server extension: its job list, and a terminal relayed to the daemon's websocket
    with jupyter(tmp_path / "jupyter", home) as js:
        jobs = js.http().get("pai/api/jobs")
        assert jobs.status_code == 200 and "sleeper" in jobs.text, jobs.text
        assert "42MARK" in task_terminal(js, sleeper)
    daemon.stop(sleeper)
    captured = sniffer.close()
    assert canary.encode() in captured
    leaked = [name for name, token in (("the owner's", daemon.token), ("bob's", bob)) if token.encode() in captured]
    assert leaked == [], "these tokens crossed loopback TCP to the daemon"
    assert b"bearer " not in captured.lower()


def _over_the_socket_as(uid: int, path: str, *requests: bytes) -> list[str]:
    """The status codes of ``requests``, each sent on a connection of its own to the unix socket at ``path`` by one
    process of account ``uid``."""
    code = (
        "import json, socket, sys\n"
        "out = []\n"
        "for request in json.load(sys.stdin):\n"
        "    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(request.encode())\n"
        "    out.append(s.makefile('rb').readline().decode().split()[1]); s.close()\n"
        "print(json.dumps(out))\n"
    )

    def drop() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    sent = json.dumps([r.decode() for r in requests]).encode()
    r = subprocess.run([PYTHON, "-I", "-c", code, path], input=sent, capture_output=True, timeout=60, preexec_fn=drop)
    assert r.returncode == 0, r.stderr
    answer: list[str] = json.loads(r.stdout)
    return answer


def _get(path: str, token: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode()


def _login(user: str, password: str) -> bytes:
    body = json.dumps({"username": user, "password": password})
    return (
        "POST /api/v2/authn/basic/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    ).encode()


NOBODY = 65534


def test_the_owners_token_from_another_account_over_the_socket_is_refused(daemon: Api) -> None:
    """The owner's token (runtime.json, 0600) in another account's hands has leaked: over the socket the daemon
    sees the account, refuses it and logs who; that account's own token, and root with the owner's, pass."""
    sock = str(daemon.socket)
    bob = daemon.new_user("bob").token
    assert _over_the_socket_as(NOBODY, sock, _get("/api/v2/jobs", daemon.token), _get("/api/v2/jobs", bob)) == [
        "403",
        "200",
    ]
    assert _over_the_socket_as(0, sock, _get("/api/v2/jobs", daemon.token)) == ["200"]
    log = (daemon.home / "local" / "daemon.log").read_text()
    assert f"uid {NOBODY} presented the cluster owner's token" in log


def test_failed_logins_over_the_socket_count_against_the_account_not_every_local_user(daemon: Api) -> None:
    """Over TCP every local account is 127.0.0.1, so one account guessing passwords locks every local user out;
    over the socket the limit is the guessing account's own."""
    daemon.new_user("carol", password="carols-pw")
    sock = str(daemon.socket)
    guesses = [_login(f"ghost{i}", "wrong-pw") for i in range(100)]  # each name once: not the per-name limit
    answers = _over_the_socket_as(NOBODY, sock, *guesses, _login("ghost-x", "wrong-pw"))
    assert set(answers[:100]) == {"400"} and answers[100] == "429"  # nobody used up its tries
    assert _over_the_socket_as(0, sock, _login("carol", "carols-pw")) == ["200"]  # root is not locked out
