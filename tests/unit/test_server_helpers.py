"""Pure parts of the server extension: inert JSON, no free text in errors, the token kept out of forwarded
queries, routes that cannot name a host or port, every setting documented."""

from __future__ import annotations

import asyncio
import json
import re
import socket

from tornado import web

from pai_jupyter.server import PaiJupyter, routes
from pai_jupyter.server.common import PaiHTTPError, error_body, safe_json, task_prefix
from pai_jupyter.server.forward import LiteralResolver
from pai_jupyter.server.proxy import without_token


def test_safe_json_is_inert_in_html_and_round_trips() -> None:
    text = safe_json({"message": "<script>alert(1)</script> & more"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"message": "<script>alert(1)</script> & more"}


def test_errors_show_only_messages_meant_for_users() -> None:
    leaky = web.HTTPError(403, "Host '%s' is not allowed", "<img src=x onerror=alert(1)>")
    assert error_body(403, leaky) == {"code": "Forbidden", "message": "Forbidden"}
    assert error_body(503, PaiHTTPError(503, "starting", code="Starting")) == {
        "code": "Starting",
        "message": "starting",
    }
    assert error_body(500, RuntimeError("secret detail"))["message"] == "Internal Server Error"


def test_the_browsers_token_is_not_forwarded() -> None:
    assert without_token("token=abc") == ""
    assert without_token("a=1&token=abc&b=%3C2%3E&tokens=3") == "a=1&b=%3C2%3E&tokens=3"


def test_routes_have_no_place_for_a_host_or_port() -> None:
    table = {handler.__name__: re.compile(pattern + "$") for pattern, handler, _ in routes("/", None)}
    proxy = table["ServiceProxyHandler"]
    assert proxy.match("/pai/jobs/u~n/main/0/tensorboard/data/runs")
    for path in (
        "/pai/jobs/u~n/main/0/6006/",
        "/pai/jobs/u~n/main/0/tensorboard:6006/",
        "/pai/jobs/127.0.0.1:22/x",
        "/pai/jobs/u~n/main/x/jupyter/",
        "/pai/proxy/6006/",
    ):
        assert not proxy.match(path), path
        assert table["PaiNotFound"].match(path), path
    assert table["TaskTerminalHandler"].match("/pai/jobs/u~n/main/0/terminal/websocket")  # daemon's, or web SSH
    assert table["DesktopProxyHandler"].match("/pai/jobs/u~n/main/0/desktop/vnc.html")
    assert not table["DesktopProxyHandler"].match("/pai/jobs/u~n/main/0/desktop:5900/")
    assert table["MetricsSocket"].match("/pai/api/jobs/u~n/metrics")
    assert task_prefix("/user/x/", "a b", "c/d", "main", 2) == "/user/x/pai/jobs/a%20b~c%2Fd/main/2/"


def test_every_setting_has_help() -> None:
    traits = PaiJupyter.class_traits(config=True)
    assert {"profile", "idle_timeout_minutes", "service_start_timeout", "metrics_min_interval"} <= set(traits)
    assert all(len(t.help) > 40 for t in traits.values())


def test_ip_literals_resolve_without_a_lookup() -> None:
    resolver = LiteralResolver()
    assert asyncio.run(resolver.resolve("127.0.0.1", 80)) == [(socket.AF_INET, ("127.0.0.1", 80))]
    assert asyncio.run(resolver.resolve("::1", 80)) == [(socket.AF_INET6, ("::1", 80))]
