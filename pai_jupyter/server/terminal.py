"""A web terminal into a running task: ``{base_url}pai/jobs/{user}~{name}/{role}/{index}/terminal/websocket``.

The cluster daemon serves the terminal itself (terminado's protocol: ``["stdin", text]``, ``["stdout", text]``,
``["set_size", rows, cols]``; ``docker exec`` with a pty for Docker tasks, a shell with the task's env and
working dir for process tasks). This handler checks Jupyter's auth and the job's owner, then relays the
websocket to the daemon with the profile's token, which the browser never sees (over the daemon's unix socket when
it runs on this machine: ``common/channel.py``). A terminal idle for
``idle_timeout_minutes`` is closed (the daemon ends its shell).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from jupyter_server.auth.decorator import ws_authenticated
from tornado import web

from ..common.channel import connectable
from .common import TASK_RE, PaiHTTPError
from .proxy import TaskProxyBase, _is_websocket

TERMINAL_RE = TASK_RE + r"/terminal/websocket"
ACTIVITY_EVERY = 1.0  # seconds: idle culling counts minutes, so a keystroke need not stamp the clocks each time


class TerminalProxyHandler(TaskProxyBase):
    """Websocket only; relays terminado messages both ways and counts them as terminal activity."""

    endpoint_headers: dict[str, str]
    _activity_at = 0.0

    @ws_authenticated
    async def get(self, user: str, name: str, role: str, index: str) -> None:
        if not _is_websocket(self):
            raise PaiHTTPError(400, "this is a websocket endpoint (terminado protocol)", code="WebSocketOnly")
        url, headers, over = await self.registry.terminal(user, name, role, int(index))
        parts = urlsplit(url)
        if parts.scheme not in ("ws", "wss") or not parts.hostname or not parts.port:
            raise PaiHTTPError(502, "the cluster gave no usable terminal address", code="ClusterError")
        self._host, self._port = parts.hostname, parts.port
        if over is not None:  # jupyter-server-proxy's unix_socket: its websocket connects there, host "localhost"
            self.unix_socket, self._host = connectable(over), "localhost"
        self.host_allowlist = [self._host]
        self.backend_path, self.backend_query = parts.path, parts.query
        self._scheme = parts.scheme
        self.endpoint_headers = headers
        await super().get(user=user, name=name, role=role, index=index)

    def get_client_uri(self, protocol: str, host: str, port: Any, proxied_path: str) -> str:
        return super().get_client_uri(self._scheme, host, port, proxied_path)

    def proxy_request_headers(self) -> Any:
        headers = super().proxy_request_headers()
        headers.pop("Origin", None)  # a server-to-server call; the browser's origin was checked here
        return headers

    def get_request_headers_override(self) -> dict[str, str]:
        return dict(self.endpoint_headers)

    async def open(self, **kw: Any) -> None:
        try:
            await self.proxy_open(self._host, self._port, self.backend_path)
        except Exception as exc:
            self.log.info("pai: terminal websocket to the cluster failed: %s", exc)
            self.close(1011, "the cluster did not open a terminal for this task")
            return
        # keystrokes are tiny frames: without TCP_NODELAY, Nagle holds each behind the previous one's ACK on
        # both legs of the relay (browser -> here, here -> daemon)
        self.set_nodelay(True)
        protocol = getattr(getattr(self, "ws", None), "protocol", None)
        if protocol is not None:
            protocol.set_nodelay(True)
        self.registry.terminal_opened(self)

    def proxied_activity(self) -> bool:
        """Jupyter's and the registry's activity clocks, at most once a second (not on every keystroke)."""
        now = time.monotonic()
        if now - self._activity_at < ACTIVITY_EVERY:
            return False
        self._activity_at = now
        self.registry.terminal_used(self)
        return super().proxied_activity()

    def on_close(self) -> None:
        super().on_close()
        self.registry.terminal_closed(self)

    @web.authenticated
    async def post(self, **kw: Any) -> None:
        raise PaiHTTPError(405, "this is a websocket endpoint (terminado protocol)", code="WebSocketOnly")

    put = delete = patch = head = options = post
