"""The MLflow server comes back where its clients look (``tracking/server.py``): its port (``localserver.lasting_port``,
``EmbeddedServer._port``) is outside the range the kernel hands to a bind to port 0 and to outgoing connections, so
that nothing on this host takes it while the server restarts, and is kept while free; a server is known by its pid
and its start time, so an exited one is started again even when its pid went to another process."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pai_jupyter.cluster.runtime.proctree import stat
from pai_jupyter.cluster.tracking.server import EmbeddedServer
from pai_jupyter.common.localserver import LASTING_FLOOR, bindable, ephemeral_span, lasting_port
from tests.polling import wait_for


@pytest.fixture
def held() -> Iterator[socket.socket]:
    """A socket listening on 127.0.0.1 at a port of the kernel's pick."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


def test_the_port_is_outside_the_ephemeral_range_and_the_task_ports() -> None:
    low, high = ephemeral_span()
    avoid = (20000, 29999)
    ports = {lasting_port("127.0.0.1", avoid=avoid) for _ in range(50)}
    assert all(LASTING_FLOOR <= p < low or high < p <= 65535 for p in ports), sorted(ports)
    assert not any(avoid[0] <= p <= avoid[1] for p in ports), sorted(ports)
    assert len(ports) > 1  # picked at random, not always the first free one
    if high < 65535:  # above the range first: no task port range nor Kubernetes' NodePorts there
        assert all(p > high for p in ports), sorted(ports)
    # nothing above a made-up range: below it, still off the task ports
    below = {lasting_port("127.0.0.1", avoid=avoid, ephemeral=(40000, 65535)) for _ in range(50)}
    assert all(LASTING_FLOOR <= p < 40000 and not avoid[0] <= p <= avoid[1] for p in below), sorted(below)


def test_a_taken_port_is_never_picked_and_with_none_left_the_kernel_picks() -> None:
    only = (LASTING_FLOOR + 1, 65535)  # a made-up ephemeral range: LASTING_FLOOR is the one port outside it
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", LASTING_FLOOR))
            s.listen()
        except OSError:
            pytest.skip(f"port {LASTING_FLOOR} is in use here")
        picked = lasting_port("127.0.0.1", ephemeral=only)
        assert picked != LASTING_FLOOR and bindable("127.0.0.1", picked)
    assert lasting_port("127.0.0.1", ephemeral=only) == LASTING_FLOOR
    low, high = ephemeral_span()
    assert low <= lasting_port("127.0.0.1", avoid=(1024, 65535)) <= high  # nothing outside: the kernel's pick


def test_the_ephemeral_range_is_read_from_the_kernel_or_defaults(tmp_path: Path) -> None:
    made = tmp_path / "range"
    made.write_text("40000\t50000\n")
    assert ephemeral_span(made) == (40000, 50000)
    made.write_text("garbage")
    assert ephemeral_span(made) == (49152, 65535)
    assert ephemeral_span(tmp_path / "none") == (49152, 65535)


def test_ipv6_hosts_are_checked_as_ipv6() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        port = lasting_port("::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    assert bindable("::1", port)


def test_the_server_keeps_its_port_while_free_and_moves_off_a_taken_one(
    tmp_path: Path, held: socket.socket, caplog: pytest.LogCaptureFixture
) -> None:
    server = EmbeddedServer(tmp_path, avoid=(20000, 29999))
    free = lasting_port("127.0.0.1")
    server.record.write_text(json.dumps({"port": free}))
    assert server._port() == free
    taken = held.getsockname()[1]
    server.record.write_text(json.dumps({"port": taken}))
    moved = server._port()
    low, high = ephemeral_span()
    assert moved != taken and not low <= moved <= high and not 20000 <= moved <= 29999
    assert f"port {taken} is taken" in caplog.text
    server.record.unlink()
    assert not low <= server._port() <= high  # the first start's port lasts too


def test_a_taken_over_server_whose_pid_went_to_another_process_is_dead_and_that_process_is_left_alone(
    tmp_path: Path,
) -> None:
    """A server taken over from a killed daemon is not this daemon's child: once it exits, its pid may be given to
    another process (pid_max is 32768 on many hosts). That process is not the server: the daemon starts the
    server again, never signals it, and never takes the exit of its own child of that pid (a task's)."""
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        server = EmbeddedServer(tmp_path)
        server.pid, server.ticks = other.pid, stat(other.pid)[1]
        assert server.alive()  # the very process
        server.ticks -= 500  # the server started 5 s before this process: the pid is another's now
        assert not server.alive()
        server.stop()
        assert other.poll() is None and server.pid is None  # not signalled, forgotten
        other.kill()
        wait_for(lambda: psutil.Process(other.pid).status() == psutil.STATUS_ZOMBIE, 10, "the child exited")
        server.pid, server.ticks, server.child = other.pid, 0, False
        server.reap()
        assert other.wait(timeout=10) == -signal.SIGKILL  # its exit was left for its own waiter
    finally:
        other.kill()
        other.wait()
