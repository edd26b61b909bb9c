"""A tiny gateway for tests: serves a daemon under ``/rest-server`` as OpenPAI's gateway serves its REST server
(the prefix stripped, ``X-Forwarded-Prefix`` set), and records which requests carried an Authorization header."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import tornado.httpserver
import tornado.netutil
import tornado.web

from .standin import serving

PREFIX = "/rest-server"


class _Forward(tornado.web.RequestHandler):
    SUPPORTED_METHODS = ("GET", "POST", "PUT", "DELETE")

    def initialize(self, target: str, seen: list[tuple[str, str, bool]]) -> None:
        self.target, self.seen = target, seen

    def check_xsrf_cookie(self) -> None:
        pass

    async def _forward(self) -> None:
        path = self.request.uri[len(PREFIX) :] if self.request.uri else "/"
        headers = {k: v for k, v in self.request.headers.get_all() if k.lower() not in ("host", "content-length")}
        headers["X-Forwarded-Prefix"] = PREFIX
        self.seen.append((self.request.method or "", path, "Authorization" in self.request.headers))
        async with httpx.AsyncClient(timeout=30) as client:
            r = await client.request(
                self.request.method or "GET", self.target + path, headers=headers, content=self.request.body or None
            )
        self.set_status(r.status_code)
        for k, v in r.headers.items():
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                self.set_header(k, v)
        self.finish(r.content)

    get = post = put = delete = _forward


@contextmanager
def prefix_proxy(target: str) -> Iterator[tuple[str, list[tuple[str, str, bool]]]]:
    """(the gateway's base URL, e.g. ``http://127.0.0.1:PORT/rest-server``, the requests it forwarded)."""
    seen: list[tuple[str, str, bool]] = []
    with serving(tornado.web.Application([(PREFIX + r"/.*", _Forward, {"target": target, "seen": seen})])) as url:
        yield f"{url}{PREFIX}", seen
