"""``pai hub``'s pid files (a process that died is not running, a zombie included) and the ports a restart keeps."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from pai_jupyter.cli.hub import _pid
from pai_jupyter.cli.hubsetup import settings
from pai_jupyter.common.localserver import ephemeral_span
from tests.polling import wait_for


def test_a_killed_hub_left_as_a_zombie_is_not_running(tmp_path: Path) -> None:
    # where nothing reaps a killed Hub (a container's PID 1), kill(pid, 0) still finds it: `pai hub start` said
    # "already running" and never started the Hub again
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    pid_file = tmp_path / "hub.pid"
    pid_file.write_text(str(child.pid))
    try:
        assert _pid(pid_file) == child.pid
        child.kill()  # not waited for: a zombie until then
        wait_for(lambda: Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1].startswith("Z"), 10, "a zombie")
        assert _pid(pid_file) is None
    finally:
        child.kill()
        child.wait()
    assert _pid(tmp_path / "absent.pid") is None
    pid_file.write_text("not a pid")
    assert _pid(pid_file) is None


def test_a_restart_beside_the_last_proxy_keeps_its_api_port(tmp_path: Path) -> None:
    # the Hub died alone and its proxy runs on, holding its API port: a new port there would leave the new Hub
    # unable to reach it ("Repeated api_request to proxy path failed"), and the start would fail after 2 minutes
    first = settings(tmp_path, "127.0.0.1", 8000, "dummy", [], "/usr/bin/python3")
    with socket.socket() as held:
        held.bind(("127.0.0.1", first.proxy_api_port))
        held.listen()
        again = settings(tmp_path, "127.0.0.1", 8000, "dummy", [], "/usr/bin/python3", proxy_running=True)
        assert (again.proxy_api_port, again.hub_port) == (first.proxy_api_port, first.hub_port)
        fresh = settings(tmp_path, "127.0.0.1", 8000, "dummy", [], "/usr/bin/python3")  # no proxy of ours there
        assert fresh.proxy_api_port != first.proxy_api_port
    # the users' servers (jobs) keep the Hub's address across its restarts: no bind to port 0 or outgoing
    # connection on this host can take a port outside the ephemeral range while the Hub is down
    low, high = ephemeral_span()
    assert not any(low <= p <= high for p in (first.hub_port, first.proxy_api_port, fresh.proxy_api_port))
