"""TensorBoard behind a token guard: the one copy of this security code, run two ways.

TensorBoard has no auth of its own and answers anyone who can reach its port (every local user), so every
TensorBoard pai_jupyter starts answers only requests with ``Authorization: token T``, ``T`` from
``$PAI_SERVICE_TOKEN_TENSORBOARD`` (an environment entry: only its account reads it, never a command line), which
the proxy sends. Plain TensorBoard APIs (``program.TensorBoard``'s ``server_class``), so it works with whatever
TensorBoard a task's image has; one too old for them fails to start rather than serving without a credential.

- The Jupyter server's TensorBoard of an ended task (``server/ended_tensorboard.py``):
  ``python -m pai_jupyter.common.tensorboard_guard TENSORBOARD-ARGS``.
- A task's own TensorBoard (``cluster/task/services.py``), where pai_jupyter may not be installed: this file's
  source, run as ``python3 -c SOURCE TENSORBOARD-ARGS`` (``source()``). So it imports the standard library only,
  and runs on any Python 3 an image may have (no ``from __future__`` import, annotations quoted).
"""

import hmac
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def guard(app: "Wsgi", token: bytes) -> "Wsgi":
    """``app`` for requests that carry the token; 403 for any other."""

    def guarded(environ: "dict[str, Any]", start_response: "Callable[..., Any]") -> "Iterable[bytes]":
        if hmac.compare_digest(environ.get("HTTP_AUTHORIZATION", "").encode(), token):
            return app(environ, start_response)
        start_response("403 Forbidden", [("Content-Type", "text/plain")])
        return [b"this TensorBoard answers only through the pai_jupyter proxy\n"]

    return guarded


def main() -> int:
    from tensorboard import program

    token = ("token " + os.environ.pop("PAI_SERVICE_TOKEN_TENSORBOARD")).encode()

    class Server(program.WerkzeugServer):  # type: ignore[misc]
        def __init__(self, wsgi_app: "Wsgi", flags: Any) -> None:
            super().__init__(guard(wsgi_app, token), flags)

    tb = program.TensorBoard(server_class=Server)
    tb.configure(argv=["tensorboard", *sys.argv[1:]])
    return int(tb.main())


def source() -> str:
    """This module's text, which a task runs with ``python3 -c`` (its ``__name__`` is then ``__main__``)."""
    with open(__file__, encoding="utf-8") as f:
        return f.read()


if __name__ == "__main__":
    sys.exit(main())
