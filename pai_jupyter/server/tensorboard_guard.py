"""``python -m pai_jupyter.server.tensorboard_guard TENSORBOARD-ARGS``: TensorBoard behind a token guard.

TensorBoard has no auth of its own and answers anyone who can reach its port (every local user), so the one this
server starts for an ended task (``ended_tensorboard``) answers only requests with ``Authorization: token T``,
``T`` from ``$PAI_SERVICE_TOKEN_TENSORBOARD`` (an environment entry: only this account reads it), which the
proxy sends. The same guard as a task's own TensorBoard.
"""

from __future__ import annotations

import hmac
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def guard(app: Wsgi, token: bytes) -> Wsgi:
    """``app`` for requests that carry the token; 403 for any other."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if hmac.compare_digest(environ.get("HTTP_AUTHORIZATION", "").encode(), token):
            return app(environ, start_response)
        start_response("403 Forbidden", [("Content-Type", "text/plain")])
        return [b"this TensorBoard answers only through the pai_jupyter proxy\n"]

    return guarded


def main() -> int:
    from tensorboard import program

    token = ("token " + os.environ.pop("PAI_SERVICE_TOKEN_TENSORBOARD")).encode()

    class Server(program.WerkzeugServer):  # type: ignore[misc]
        def __init__(self, wsgi_app: Wsgi, flags: Any) -> None:
            super().__init__(guard(wsgi_app, token), flags)

    tb = program.TensorBoard(server_class=Server)
    tb.configure(argv=["tensorboard", *sys.argv[1:]])
    return int(tb.main())


if __name__ == "__main__":
    sys.exit(main())
