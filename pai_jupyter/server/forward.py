"""Streaming HTTP forward for the task proxy: the response goes to the browser chunk by chunk as it arrives.

jupyter-server-proxy's HTTP path reads the whole response into memory before writing it (100 MB of a task's
file would sit in the Jupyter server twice, and the first byte waits for the last), and its streaming mode
drops Content-Encoding while passing gzip bytes through. This forward keeps status, headers (encoding and
length included) and body as the service sent them, holds no more than a chunk, and skips the thread hop of a
DNS lookup for the IP literals the cluster reports.

One exception to "as the service sent them": ``rewrite_page(body)`` rewrites HTML pages (read whole, they are
small; a gzipped one goes on unzipped), and JSON bodies too with ``json_too``. A task's Jupyter writes its own
base path into every page (PageConfig, script and link URLs) and its kernel specs' logo URLs; behind a Jupyter
server whose base_url is not "/" (JupyterHub's /user/NAME/), the browser must see that base_url in front.
TensorBoard's page gets its fonts made relative and the sandbox's shim (``sandbox.py``). Everything else keeps
its encoding.
"""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
import socket
from collections.abc import Callable
from typing import Any

from tornado import httputil
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.iostream import StreamClosedError
from tornado.netutil import DefaultLoopResolver, Resolver
from tornado.simple_httpclient import SimpleAsyncHTTPClient
from tornado.web import RequestHandler

HOP_BY_HOP = (
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
    "Proxy-Authorization",
    "Proxy-Authenticate",
    "Expect",
)
NOT_COPIED = ("Transfer-Encoding", "Connection", "Keep-Alive")
MAX_PAGE = 4 << 20  # a larger HTML body is no Jupyter page: it streams through as it is
TORNADO_DEFAULTS = ("Server", "Content-Type", "Date")  # what RequestHandler.clear() sets before set_default_headers
_clients: dict[asyncio.AbstractEventLoop, SimpleAsyncHTTPClient] = {}


class LiteralResolver(Resolver):
    """An IP literal resolves to itself; anything else goes through the event loop's getaddrinfo."""

    async def resolve(
        self, host: str, port: int, family: socket.AddressFamily = socket.AF_UNSPEC
    ) -> list[tuple[int, Any]]:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            resolver: Resolver = DefaultLoopResolver()  # Configurable.__new__ is typed Any
            return await resolver.resolve(host, port, family)
        return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, (host, port))]


def http_client() -> SimpleAsyncHTTPClient:
    """One client per event loop; no queueing (long requests must not hold up others), no body size cap."""
    loop = asyncio.get_running_loop()
    if loop not in _clients:
        _clients[loop] = SimpleAsyncHTTPClient(
            force_instance=True, max_clients=10_000, resolver=LiteralResolver(), max_body_size=1 << 50
        )
    return _clients[loop]


class Relaying(RequestHandler):
    """Mixin for a handler that relays a service's answer: once ``start_relay`` was called the response carries the
    service's headers only, none of this server's defaults (tornado's Content-Type and Server, Jupyter's
    Content-Security-Policy and X-Content-Type-Options, CORS headers); its own answers (errors) keep them."""

    relaying = False

    def set_default_headers(self) -> None:
        if not self.relaying:
            super().set_default_headers()

    def start_relay(self, code: int, reason: str | None) -> None:
        """Status ``code`` and no header yet. Cookies this server set (its _xsrf cookie) are not headers until
        tornado's flush, so they stay."""
        self.relaying = True
        self.clear()  # every header set so far goes; the defaults come back, less the handler's own (above)
        for name in TORNADO_DEFAULTS:
            self.clear_header(name)
        self.set_status(code, reason)


class UpstreamFailed(Exception):
    """The service could not be reached, or failed before sending its status line (nothing was sent yet)."""


class _Relay:
    """One answer as it streams in: its status and headers go to the browser once complete, its body chunk by
    chunk, except an HTML (or JSON) page to rewrite, read whole up to MAX_PAGE."""

    def __init__(
        self,
        handler: Relaying,
        method: str,
        rewrite: Callable[[int, httputil.HTTPHeaders], None] | None,
        rewrite_page: Callable[[bytes], bytes] | None,
        json_too: bool,
    ) -> None:
        self.handler, self.method, self.rewrite = handler, method, rewrite
        self.rewrite_page, self.json_too = rewrite_page, json_too
        self.page: bytearray | None = None  # an HTML page being read whole, to rewrite
        self.gzipped = False
        self.start: list[httputil.ResponseStartLine] = []
        self.got = httputil.HTTPHeaders()
        self.sent = False

    def on_header(self, line: str) -> None:
        if not self.start:
            self.start.append(httputil.parse_response_start_line(line.strip()))
        elif line.strip():
            self.got.parse_line(line)
        else:  # end of the headers: status and headers to the browser
            self.send_headers()

    def send_headers(self) -> None:
        handler, got = self.handler, self.got
        code = self.start[0].code
        if self.rewrite is not None:
            self.rewrite(code, got)
        handler.start_relay(code, self.start[0].reason or None)
        for name, value in got.get_all():
            if name not in NOT_COPIED:
                handler.add_header(name, value)
        ctype = got.get("Content-Type", "").lower()
        encoding = got.get("Content-Encoding", "identity").strip().lower()  # TensorBoard says "identity"
        if (
            self.rewrite_page is not None
            and self.method != "HEAD"
            and encoding in ("identity", "gzip")
            and (ctype.startswith("text/html") or (self.json_too and ctype.startswith("application/json")))
        ):
            self.page, self.gzipped = bytearray(), encoding == "gzip"
            handler.clear_header("Content-Length")
            handler.clear_header("Content-Encoding")
        self.sent = True

    def on_chunk(self, chunk: bytes) -> None:
        handler = self.handler
        if handler.request.connection is None or handler.request.connection.stream.closed():  # type: ignore
            raise StreamClosedError()  # the browser went away: stop reading from the service
        if self.page is not None:
            self.page += chunk
            if len(self.page) <= MAX_PAGE:
                return
            chunk, self.page = bytes(self.page), None  # too big to be a page: the rest streams as it comes
            if self.gzipped:
                handler.set_header("Content-Encoding", "gzip")
        RequestHandler.write(handler, chunk)  # not jupyter-server-proxy's wrappers: they drop flush()'s future
        RequestHandler.flush(handler).add_done_callback(lambda f: f.exception())

    def write_page(self) -> None:
        """The page read whole, rewritten (a page said to be gzip that is not goes on as it came)."""
        if self.page is None or self.rewrite_page is None:
            return
        body = bytes(self.page)
        try:
            body = gzip.decompress(body) if self.gzipped else body
        except (OSError, EOFError):  # said gzip but is not: pass it on as it came
            self.handler.set_header("Content-Encoding", "gzip")
        else:
            body = self.rewrite_page(body)
        RequestHandler.write(self.handler, body)


async def forward(
    handler: Relaying,
    url: str,
    headers: httputil.HTTPHeaders,
    rewrite: Callable[[int, httputil.HTTPHeaders], None] | None = None,
    timeout: float = 3600.0,
    rewrite_page: Callable[[bytes], bytes] | None = None,
    json_too: bool = False,
) -> None:
    """Send ``handler``'s request to ``url`` and relay the answer as it streams in.

    ``rewrite(status, headers)`` may change the response headers before they are sent. Raises UpstreamFailed
    when nothing came back; after the headers went out, a broken upstream just ends the response early.
    """
    for name in HOP_BY_HOP:
        headers.pop(name, None)
    method = handler.request.method or "GET"
    body = handler.request.body or (b"" if method in ("POST", "PUT", "PATCH") else None)
    relay = _Relay(handler, method, rewrite, rewrite_page, json_too)
    request = HTTPRequest(
        url,
        method=method,
        headers=headers,
        body=body,
        follow_redirects=False,
        decompress_response=False,
        connect_timeout=20,
        request_timeout=timeout,
        header_callback=relay.on_header,
        streaming_callback=relay.on_chunk,
        allow_nonstandard_methods=True,
    )
    try:  # (raise_error=False keeps an HTTP error status an answer; a refused connection still raises)
        response = await http_client().fetch(request, raise_error=False)
    except (OSError, HTTPClientError) as exc:
        if not relay.sent:  # a task that ended, a service that went away: the caller says what it knows
            raise UpstreamFailed(str(exc) or type(exc).__name__) from None
        handler.request.connection.stream.close()  # type: ignore[union-attr]
        return  # (broken after the headers went out: close, do not pad)
    if not relay.sent:
        raise UpstreamFailed(str(response.error or f"no answer from {url}"))
    relay.write_page()
    handler.finish()
