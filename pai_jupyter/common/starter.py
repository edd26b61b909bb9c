"""How a client reaches the embedded daemon without importing it: a starter, given to the client or registered
here under a profile's name by the package that provides the daemon.

The ``local`` profile means the embedded cluster, which lives in ``pai_jupyter.cluster``; that package registers
its starter when it is imported (``cluster/control.py``). A client of the ``local`` profile that was given no
starter asks ``starter_for("local")``, which imports the provider named in ``PROVIDERS`` only then: an
installation without the daemon gets None and a clear error, and the client's modules never import it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol

LOCAL = "local"
PROVIDERS = {LOCAL: "pai_jupyter.cluster.control"}  # the module that registers each named starter


class StartError(RuntimeError):
    """The daemon was not running and could not be started; the message says why."""


class Stopped(StartError):
    """The user stopped the daemon (``pai cluster stop``), so no client starts it; the message says how to."""


class Starter(Protocol):
    def __call__(self, home: Path | None, *, start: bool) -> dict[str, Any] | None:
        """The running daemon's address (``{"url", "token", ...}``), starting it first when ``start`` is true;
        None when none runs and ``start`` is false. Raises StartError."""


_starters: dict[str, Starter] = {}


def register(name: str, starter: Starter) -> None:
    _starters[name] = starter


def starter_for(name: str = LOCAL) -> Starter | None:
    """The starter registered under ``name``, importing its provider first when it is not yet registered."""
    if name not in _starters and name in PROVIDERS:
        try:
            importlib.import_module(PROVIDERS[name])
        except ImportError:
            return None
    return _starters.get(name)
