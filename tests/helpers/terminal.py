"""A task's terminal as the tests drive it: terminado's protocol over the daemon's websocket."""

from __future__ import annotations

import asyncio
import json
import re
import time

from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from tests.helpers.daemon import Api


class Terminal:
    """terminado's protocol: ``["stdin", text]`` in, ``["stdout", text]`` out."""

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws, self.out = ws, ""

    @classmethod
    async def open(cls, api: Api, job: str) -> Terminal:
        url = api.url.replace("http", "ws", 1) + f"/api/v2/local/jobs/{job}/tasks/main/0/terminal"
        headers = {"Authorization": f"Bearer {api.token}"}
        return cls(await websocket_connect(HTTPRequest(url, headers=headers, connect_timeout=20)))

    async def run(self, line: str, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Type ``line``; the first match of ``pattern`` in what the shell printed (not in the echo of the line:
        let the pattern need what only running it prints)."""
        self.ws.write_message(json.dumps(["stdin", line + "\r"]))
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.out)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} in the terminal within {timeout} s:\n{self.out}")
            msg = await asyncio.wait_for(self.ws.read_message(), left)
            if msg is None:
                raise AssertionError(f"the terminal closed before {pattern!r}:\n{self.out}")
            kind, *rest = json.loads(msg)
            if kind == "stdout":
                self.out += rest[0]
        return found

    def close(self) -> None:
        self.ws.close()
