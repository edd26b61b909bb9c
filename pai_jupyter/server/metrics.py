"""``{base_url}pai/api/jobs/{user}~{name}/metrics``: a websocket that pushes the job's per-task metrics.

Each message from the server is one ``AsyncClient.metrics(job)`` snapshot as JSON (``time``, ``gpu``
availability, ``tasks`` with CPU %, memory and GPUs), or ``{"error": {"code", "message"}}`` — after which the
socket closes when the cluster cannot give metrics at all (a remote OpenPAI profile). The client steers it
with ``{"rate": seconds}`` (bounded below by ``metrics_min_interval``) and ``{"pause": true|false}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado import websocket
from tornado.iostream import StreamClosedError

from ..client import JobNotFound, NotSupported, PaiError
from .common import PaiHTTPError, SafeErrors, not_found, safe_json
from .registry import Registry

OPEN: set[MetricsSocket] = set()


class MetricsSocket(SafeErrors, WebSocketMixin, websocket.WebSocketHandler, JupyterHandler):
    """One polling loop per open socket; it stops when the socket closes."""

    def initialize(self, registry: Registry) -> None:
        self.registry = registry
        self.interval = registry.config.metrics_default_interval
        self.paused = False
        self.wake = asyncio.Event()
        self.loop_task: asyncio.Task[None] | None = None

    @ws_authenticated
    async def get(self, user: str, name: str) -> None:
        self.job = self.registry.job_id(user, name)
        try:
            await self.registry.client.detail(self.job)
        except JobNotFound:
            raise not_found() from None
        except PaiError:
            raise PaiHTTPError(
                502, "the cluster did not answer; see the Jupyter server's log", code="ClusterError"
            ) from None
        if len(OPEN) >= self.registry.config.metrics_max_sockets:
            raise PaiHTTPError(
                429, "too many metrics websockets are open on this server", retry_after=5, code="TooManySockets"
            )
        await super().get(user, name)

    def open(self, *args: Any, **kwargs: Any) -> None:
        super().open(*args, **kwargs)
        OPEN.add(self)
        self.loop_task = asyncio.get_running_loop().create_task(self._pump())

    def on_message(self, message: str | bytes) -> None:
        try:
            msg = json.loads(message)
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            self._send({"error": {"code": "BadMessage", "message": 'send {"rate": seconds} or {"pause": bool}'}})
            return
        rate = msg.get("rate")
        if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
            self.interval = max(float(rate), self.registry.config.metrics_min_interval)
        if isinstance(msg.get("pause"), bool):
            self.paused = msg["pause"]
        self.wake.set()

    def on_close(self) -> None:
        OPEN.discard(self)
        if self.loop_task is not None:
            self.loop_task.cancel()

    def _send(self, data: Any) -> bool:
        try:
            self.write_message(safe_json(data))
        except (websocket.WebSocketClosedError, StreamClosedError):
            return False
        return True

    async def _pump(self) -> None:
        while True:
            if not self.paused:
                try:
                    metrics = await self.registry.client.metrics(self.job)
                    snapshot: Any = metrics.model_dump(mode="json", by_alias=True)  # the wire shape, as the daemon's
                except (NotSupported, JobNotFound) as exc:
                    code = "NotSupported" if isinstance(exc, NotSupported) else "NotFound"
                    message = exc.message if isinstance(exc, NotSupported) else "the job is gone"
                    self._send({"error": {"code": code, "message": message}})
                    self.close(1000, code)
                    return
                except PaiError as exc:
                    self.log.info("pai: metrics of %s: %s", self.job, exc)
                    snapshot = {"error": {"code": "ClusterError", "message": "the cluster did not answer"}}
                if not self._send(snapshot):
                    return
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), self.interval)
            except asyncio.TimeoutError:
                pass
