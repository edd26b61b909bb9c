"""A tornado application served on a free loopback port by an event loop of its own, in a thread: how the tests
stand in for a remote OpenPAI, a gateway or a cluster behind a firewall while the test itself blocks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web


@contextmanager
def serving(app: tornado.web.Application) -> Iterator[str]:
    """``app`` served while the block runs; its base URL, ``http://127.0.0.1:PORT``."""
    ready = threading.Event()
    state: dict[str, Any] = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        server = tornado.httpserver.HTTPServer(app)
        server.add_sockets(sockets)
        state.update(port=sockets[0].getsockname()[1], loop=loop)
        ready.set()
        loop.run_forever()
        server.stop()
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10), "the stand-in server did not start"
    try:
        yield f"http://127.0.0.1:{state['port']}"
    finally:
        state["loop"].call_soon_threadsafe(state["loop"].stop)
        thread.join(10)
