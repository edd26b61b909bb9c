"""Is this the local server? Decided once (``client.locality``) for the client, the kernel provisioner and the
server extension: only the profile and the server's own /api/v2/info decide, never the URL's host."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from pai_jupyter.client import AsyncClient, Client, NotSupported, Profile, Unauthorized
from pai_jupyter.client.locality import REMOTE, Locality, locality, serves_local_routes

EMBEDDED_INFO = {"launcherType": "local", "local": {"runtime": "process"}, "admin": True}
OPENPAI_INFO = {"launcherType": "k8s", "authnMethod": "basic"}
HERE = Locality(embedded=True, this_machine=True)
ELSEWHERE = Locality(embedded=True, this_machine=False)
LOCAL = Profile(name="local")


@pytest.mark.parametrize("info", [None, EMBEDDED_INFO])
def test_the_local_profile_is_this_machines_embedded_cluster(info: dict[str, Any] | None) -> None:
    assert locality(LOCAL, info) == HERE


def test_a_local_profile_answered_by_something_else_is_neither() -> None:
    assert locality(LOCAL, OPENPAI_INFO) == REMOTE


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9186",
        "http://[::1]:9186",
        "http://localhost:9186",
        "https://pai.example.com/rest-server",
        "http://10.0.0.5",
    ],
)
def test_a_url_profile_is_never_this_machine_and_embedded_only_when_its_info_says(url: str) -> None:
    # a loopback url may be an SSH port forward to a remote OpenPAI, or a daemon run for others: the host is
    # no evidence either way (the kernel's tunnel tests rely on a loopback profile counting as remote)
    profile = Profile(name="cluster", url=url)
    assert locality(profile, EMBEDDED_INFO) == ELSEWHERE
    assert locality(profile, OPENPAI_INFO) == REMOTE
    assert locality(profile, None) == REMOTE  # not asked, or did not answer


@pytest.mark.parametrize("info", [None, [], ["local"], "local", {"launcherType": "local"}, {"local": None}])
def test_only_an_info_object_with_the_local_block_is_an_embedded_clusters(info: object) -> None:
    assert serves_local_routes(info) is (isinstance(info, dict) and "local" in info)


def _server(info: dict[str, Any] | None, seen: list[str]) -> httpx.MockTransport:
    def answer(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path)
        if info is None:
            return httpx.Response(401, json={"code": "UnauthorizedUserError", "message": "token expired"})
        return httpx.Response(200, json=info)

    return httpx.MockTransport(answer)


@pytest.mark.parametrize(("info", "expected"), [(EMBEDDED_INFO, ELSEWHERE), (OPENPAI_INFO, REMOTE)])
def test_a_client_asks_a_url_profiles_server_once(info: dict[str, Any], expected: Locality) -> None:
    seen: list[str] = []
    with Client(url="http://127.0.0.1:9186", token="t", transport=_server(info, seen)) as pai:
        assert pai.locality() == expected
        assert pai.locality() == expected
        if not expected.embedded:
            with pytest.raises(NotSupported, match="metrics needs the embedded cluster"):
                pai.metrics("alice~job")
    assert seen == ["/api/v2/info"]


def test_a_server_that_refuses_info_is_an_error_and_asked_again_next_time() -> None:
    seen: list[str] = []
    with Client(url="http://127.0.0.1:9186", token="t", transport=_server(None, seen)) as pai:
        for _ in range(2):
            with pytest.raises(Unauthorized, match="token expired"):
                pai.locality()
    assert seen == ["/api/v2/info", "/api/v2/info"]


def test_the_local_profile_needs_no_request(tmp_path: Path) -> None:
    def nobody(home: Path | None, *, start: bool) -> dict[str, Any] | None:
        raise AssertionError("the local profile's locality must not reach the daemon")

    with Client("local", home=tmp_path, starter=nobody) as pai:
        assert pai.locality() == HERE


def test_the_async_client_decides_the_same_way() -> None:
    seen: list[str] = []

    async def main() -> Locality:
        async with AsyncClient(url="http://localhost:9186", token="t", transport=_server(EMBEDDED_INFO, seen)) as pai:
            first = await pai.locality()
            assert await pai.locality() == first
            return first

    assert asyncio.run(main()) == ELSEWHERE
    assert seen == ["/api/v2/info"]
