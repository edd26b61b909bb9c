"""The helper servers' port checks: a port counts as the helper's only where the helper itself listens."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from pai_jupyter.common.localserver import free_port, serves
from tests.polling import wait_for


def test_a_port_another_process_took_is_not_the_helpers() -> None:
    # free_port() found it free; another process bound it before the helper did: it answers, but not as the helper
    port = free_port()
    code = (
        f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); print(1, flush=True); "
        "time.sleep(60)"
    )
    other = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == b"1"
        wait_for(lambda: serves(other.pid, port), 10, "the other process listening")
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # it answers there, as the helper would
        assert not serves(os.getpid(), port)
    finally:
        other.kill()
        other.wait()
    with socket.socket() as mine:
        mine.bind(("127.0.0.1", port))
        assert not serves(os.getpid(), port)  # bound, not listening yet
        mine.listen()
        assert serves(os.getpid(), port)
    assert not serves(2**22 + 7, port)  # no such process
