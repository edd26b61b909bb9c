"""An httpx transport that notes the path of each request it sends, for tests that count what a client asked."""

from __future__ import annotations

import httpx


class Counting(httpx.AsyncHTTPTransport):
    """A real transport that notes the path of each request it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await super().handle_async_request(request)
