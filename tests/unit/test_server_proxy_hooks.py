"""The task proxy and jupyter-server-proxy meet only at its public API: a check of the sources for its private
names, and, in-process (a tornado Application, no server), the activity hook it calls on relayed websocket
traffic and the relayed answer's headers."""

from __future__ import annotations

import ast
import asyncio
import importlib
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import jupyter_server_proxy
from tornado import httputil, web
from tornado.httpserver import HTTPServer
from tornado.testing import bind_unused_port

import pai_jupyter
from pai_jupyter.server.config import PaiJupyter
from pai_jupyter.server.forward import Relaying, forward
from pai_jupyter.server.proxy import ACTIVITY_SOURCE, ServiceProxyHandler
from pai_jupyter.server.registry import Entry, Registry
from pai_jupyter.server.terminal import TerminalProxyHandler

NAMED = {"_record_activity", "_get_context_path", "_headers"}  # the ones the extension once used
KEY = ("alice~train", "main", 0, "tensorboard")


def _private_names_of_jupyter_server_proxy() -> set[str]:
    """``_name``s jupyter-server-proxy's request handlers (ProxyHandler and the rest) define or use on ``self``:
    their private methods and state, and the tornado privates they reach into, such as ``_headers``."""
    names: set[str] = set()
    package = Path(jupyter_server_proxy.__file__).parent
    for path in package.rglob("*.py"):
        module_name = ".".join(("jupyter_server_proxy", *path.relative_to(package).with_suffix("").parts))
        try:
            module = importlib.import_module(module_name.removesuffix(".__init__"))
        except ImportError:  # a part that needs what the extension does not use (its standalone server)
            continue
        classes = [c for c in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(c, ast.ClassDef)]
        for cls in classes:
            handler = getattr(module, cls.name, None)
            if not (isinstance(handler, type) and issubclass(handler, web.RequestHandler)):
                continue
            names.update(line_name[1] for line_name in _methods(cls))
            names.update(
                node.attr
                for node in ast.walk(cls)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
            )
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _methods(tree: ast.AST) -> list[tuple[int, str]]:
    return [
        (item.lineno, item.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _uses(tree: ast.AST, forbidden: set[str]) -> list[tuple[int, str]]:
    """(line, name) for each attribute access or method (override) of a forbidden name, and each import of a
    private name from jupyter_server_proxy, in the order they appear."""
    hits = [(line, f"def {name}") for line, name in _methods(tree) if name in forbidden]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in forbidden:
            hits.append((node.lineno, node.attr))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jupyter_server_proxy"):
            hits += [
                (node.lineno, f"import {node.module}")
                for part in (node.module or "").split(".")
                if part.startswith("_")
            ]
            hits += [(node.lineno, f"import {a.name}") for a in node.names if a.name.startswith("_")]
    return sorted(hits)


def test_no_source_uses_a_private_name_of_jupyter_server_proxy() -> None:
    private = _private_names_of_jupyter_server_proxy()
    assert {"_record_activity", "_get_context_path", "_requested_subprotocols"} <= private  # the scan sees them
    forbidden = private | NAMED
    root = Path(pai_jupyter.__file__).parent
    found = [
        f"{path.relative_to(root.parent)}:{line}: {what}"
        for path in sorted(root.rglob("*.py"))
        for line, what in _uses(ast.parse(path.read_text(encoding="utf-8")), forbidden)
    ]
    assert found == []


def test_the_check_finds_each_kind_of_use() -> None:
    code = (
        "class H(ProxyHandler):\n"
        "    def _record_activity(self):\n        pass\n"
        "    def f(self, handler):\n        handler._headers = {}\n        self._get_context_path('h', 1)\n"
        "from jupyter_server_proxy.handlers import _private\n"
    )
    assert [what for _, what in _uses(ast.parse(code), NAMED)] == [
        "def _record_activity",
        "_headers",
        "_get_context_path",
        "import _private",
    ]


# ---- in-process handlers -------------------------------------------------------------------------------------
def _handler(cls: type[web.RequestHandler], registry: Registry) -> Any:
    app = web.Application(base_url="/", last_activity_times={})
    start = httputil.RequestStartLine("GET", "/pai/jobs/alice~train/main/0/tensorboard/x", "HTTP/1.1")
    request = httputil.HTTPServerRequest(
        start_line=start, connection=mock.Mock(), headers=httputil.HTTPHeaders({"Host": "127.0.0.1"})
    )
    return cls(app, request, registry=registry)


def _registry() -> Registry:
    return Registry(mock.Mock(), PaiJupyter())


def test_relayed_websocket_traffic_reaches_both_activity_clocks() -> None:
    registry = _registry()
    registry.entries[KEY] = entry = Entry()
    entry.last_used = 0.0
    handler = _handler(ServiceProxyHandler, registry)
    handler.key = KEY
    handler.on_message("hello")  # jupyter-server-proxy's relay of a browser message (no backend socket here)
    assert entry.last_used > 0.0
    assert "jupyter-server-proxy" in handler.settings["last_activity_times"]  # it called our hook, which said yes
    entry.last_used = 0.0
    handler.record_activity()  # what our HTTP relay calls
    assert entry.last_used > 0.0 and ACTIVITY_SOURCE in handler.settings["last_activity_times"]


def test_terminal_activity_is_counted_at_most_once_a_second() -> None:
    registry = _registry()
    handler = _handler(TerminalProxyHandler, registry)
    registry.terminal_opened(handler)
    registry.terminals[handler] = 0.0
    handler.on_message("x")
    assert registry.terminals[handler] > 0.0 and "jupyter-server-proxy" in handler.settings["last_activity_times"]
    registry.terminals[handler] = 0.0
    handler.settings["last_activity_times"].clear()
    handler.on_message("y")  # within a second of the first: neither clock moves
    assert registry.terminals[handler] == 0.0 and handler.settings["last_activity_times"] == {}
    handler._activity_at -= 1.0  # our own throttle's state: as if a second went by
    handler.on_message("z")
    assert registry.terminals[handler] > 0.0 and "jupyter-server-proxy" in handler.settings["last_activity_times"]


# ---- a relayed answer's headers, over loopback sockets -----------------------------------------------------------
def _serve(app: web.Application) -> tuple[HTTPServer, int]:
    sock, port = bind_unused_port()
    server = HTTPServer(app)
    server.add_sockets([sock])
    return server, port


class _Service(web.RequestHandler):
    def get(self) -> None:
        self.set_status(201)
        self.set_header("Content-Type", "text/plain")
        self.set_header("Server", "the-service")
        self.set_header("Content-Security-Policy", "theirs")
        self.add_header("Set-Cookie", "a=1")
        self.add_header("Set-Cookie", "b=2")
        self.write("body")


class _Defaults(web.RequestHandler):
    """Stands for JupyterHandler: default headers on every answer."""

    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", "ours")
        self.set_header("X-Content-Type-Options", "nosniff")


class _Relay(Relaying, _Defaults):
    async def get(self, what: str) -> None:
        self.set_header("X-Set-Before", "1")
        self.set_cookie("_xsrf", "ours")
        if what == "error":
            raise web.HTTPError(409)
        await forward(self, self.settings["service"], httputil.HTTPHeaders())


def test_a_relayed_answer_has_the_services_headers_and_our_cookie_only() -> None:
    async def body() -> tuple[Any, Any]:
        service, service_port = _serve(web.Application([("/", _Service)]))
        server, port = _serve(
            web.Application([("/(relay|error)", _Relay)], service=f"http://127.0.0.1:{service_port}/")
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                return await http.get("/relay"), await http.get("/error")
        finally:
            server.stop()
            service.stop()

    relayed, error = asyncio.run(body())
    assert relayed.status_code == 201 and relayed.text == "body"
    assert relayed.headers["Content-Type"] == "text/plain"
    assert relayed.headers.get_list("Content-Security-Policy") == ["theirs"]
    assert sorted(relayed.headers.get_list("Set-Cookie")) == ["_xsrf=ours; Path=/", "a=1", "b=2"]
    assert "X-Set-Before" not in relayed.headers and "X-Content-Type-Options" not in relayed.headers
    assert relayed.headers.get_list("Server") == ["the-service"] and len(relayed.headers.get_list("Date")) == 1
    assert error.status_code == 409  # this server's own answer keeps its defaults
    assert error.headers["Content-Security-Policy"] == "ours" and error.headers["X-Content-Type-Options"] == "nosniff"
