"""A client without the daemon: nothing outside pai_jupyter/cluster imports it; the local profile reaches the
embedded daemon through a starter (given, or registered by the cluster package); requests go through an
injectable httpx transport."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from pai_jupyter.client import Client, ServerInfo, ServerUnavailable
from pai_jupyter.client.base import LOCAL_DOWN
from pai_jupyter.common import starter
from tests.helpers.imports import PACKAGE, own_imports

# the cluster's own command line (pai cluster ...), `pai hub`, which starts one and links it to JupyterHub, and
# `make demo`, which starts and stops an embedded cluster
CLUSTER_DRIVERS = {"cli/cluster.py", "cli/hub.py", "cli/hubsetup.py", "demo.py"}


def _imports_cluster(path: Path) -> list[str]:
    return [n for n in own_imports(path) if n == "pai_jupyter.cluster" or n.startswith("pai_jupyter.cluster.")]


def test_nothing_outside_the_cluster_package_imports_it() -> None:
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("cluster/") or rel in CLUSTER_DRIVERS:
            continue
        if found := _imports_cluster(path):
            offenders[rel] = found
    assert offenders == {}


def test_a_client_loads_no_daemon_code() -> None:
    code = (
        "import sys, httpx; from pai_jupyter.client import Client; import pai_jupyter.server.common; "
        "c = Client(url='http://x.test', token='t', transport=httpx.MockTransport("
        "lambda r: httpx.Response(200, json={'launcherType': 'k8s'}))); c.info(); "
        "print(sorted(m for m in sys.modules if m.startswith('pai_jupyter.cluster')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


class FakeStarter:
    def __init__(self, info: dict[str, Any] | None = None, error: str | None = None):
        self.info, self.error, self.calls = info, error, []  # type: ignore[var-annotated]

    def __call__(self, home: Path | None, *, start: bool) -> dict[str, Any] | None:
        self.calls.append((home, start))
        if self.error:
            raise starter.StartError(self.error)
        return self.info


def test_the_local_profile_uses_the_starter_it_is_given(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []

    def daemon(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"launcherType": "local"})

    given = FakeStarter({"url": "http://127.0.0.1:1234", "token": "tok"})
    c = Client("local", home=tmp_path, starter=given, transport=httpx.MockTransport(daemon))
    assert c.info().launcher_type == "local"
    assert given.calls == [(tmp_path, True)]
    assert str(seen[0].url) == "http://127.0.0.1:1234/api/v2/info"
    assert seen[0].headers["Authorization"] == "Bearer tok"


def test_a_starter_that_finds_nothing_or_fails_says_so(tmp_path: Path) -> None:
    idle = FakeStarter(None)
    with pytest.raises(ServerUnavailable, match="not running; start the local cluster"):
        Client("local", home=tmp_path, starter=idle, auto_start=False, retries=0).info()
    assert idle.calls == [(tmp_path, False)]  # auto_start=False: look, never start
    broken = FakeStarter(error="the daemon exited with code 1")
    with pytest.raises(ServerUnavailable, match="could not be started: the daemon exited with code 1"):
        Client("local", home=tmp_path, starter=broken, retries=0).info()


def test_a_cluster_stopped_under_a_client_says_so_on_that_very_call(tmp_path: Path) -> None:
    """``pai cluster stop`` after the client found the daemon: the next call's connection fails, the client looks
    for the daemon again at once (not only after its retries) and the call says what the starter says, with the
    code that tells a server these words are the client's own (safe to show: not the cluster's text)."""
    running = {"url": "http://127.0.0.1:1234", "token": "tok"}

    class StoppedLater:
        calls = 0

        def __call__(self, home: Path | None, *, start: bool) -> dict[str, Any] | None:
            self.calls += 1
            if self.calls > 1:
                raise starter.Stopped("it was stopped with `pai cluster stop`; start it again with: pai cluster start")
            return running

    answers = iter([httpx.Response(200, json={"launcherType": "local"})])

    def daemon(req: httpx.Request) -> httpx.Response:
        response = next(answers, None)
        if response is None:
            raise httpx.ConnectError("connection refused", request=req)
        return response

    c = Client("local", home=tmp_path, starter=StoppedLater(), transport=httpx.MockTransport(daemon), retries=1)
    assert c.info().launcher_type == "local"
    with pytest.raises(ServerUnavailable) as info:
        c.info()
    assert info.value.message == (
        "the local cluster is not running: it was stopped with `pai cluster stop`; start it again with: "
        "pai cluster start"
    )
    assert info.value.code == LOCAL_DOWN


def test_the_cluster_package_registers_the_local_starter() -> None:
    from pai_jupyter.cluster import control

    assert starter.starter_for(starter.LOCAL) is control.local_starter
    assert issubclass(control.DaemonError, starter.StartError)
    assert issubclass(starter.Stopped, starter.StartError)
    assert starter.starter_for("no-such-profile") is None


def test_the_async_client_takes_the_transport_too() -> None:
    import asyncio

    from pai_jupyter.client import AsyncClient

    seen: list[str] = []

    def openpai(req: httpx.Request) -> httpx.Response:
        seen.append(str(req.url))
        return httpx.Response(200, json={"launcherType": "k8s"})

    async def main() -> ServerInfo:
        c = AsyncClient(url="http://openpai.test", token="t", transport=httpx.MockTransport(openpai))
        try:
            return await c.info()
        finally:
            await c.aclose()

    assert asyncio.run(main()).launcher_type == "k8s"
    assert seen == ["http://openpai.test/api/v2/info"]
