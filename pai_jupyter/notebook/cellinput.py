"""What a magic does with its input before the client sees it: ``{name}`` interpolation from the notebook,
``--param k=v`` values, and holding an interrupt while a submit is in flight."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import threading
from collections.abc import Iterator
from typing import Any

# {name} or {name.attr} is replaced by the notebook variable; {{name}} writes a literal {name}. Only braces around
# a bare (dotted) identifier count, so JSON objects, YAML flow mappings and shell ${VAR} are left alone.
_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_INTERP = re.compile(r"\{\{(" + _NAME + r")\}\}|(?<!\$)\{(" + _NAME + r")\}")


class CellInputError(ValueError):
    """A magic's own input cannot be used (a ``{name}`` that is not defined, a ``--param`` that is not
    KEY=VALUE, no job named where one is needed): said in the cell, nothing is sent."""


def interpolate(text: str, namespace: dict[str, Any]) -> str:
    """Fill ``{name}`` / ``{obj.attr}`` from the notebook's namespace; ``{{name}}`` stays a literal ``{name}``.

    True / False / None are written as JSON's true / false / null (valid in YAML too); other values as str().
    """

    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return "{" + m.group(1) + "}"
        head, *attrs = m.group(2).split(".")
        if head not in namespace:
            raise CellInputError(
                f"{{{m.group(2)}}}: {head!r} is not defined in the notebook; write "
                f"{{{{{m.group(2)}}}}} for a literal {{{m.group(2)}}}, or use --raw"
            )
        value = namespace[head]
        for a in attrs:
            try:
                value = getattr(value, a)
            except AttributeError:
                raise CellInputError(f"{{{m.group(2)}}}: {type(value).__name__} has no attribute {a!r}") from None
        if value is None or isinstance(value, bool):
            return json.dumps(value)
        return str(value)

    return _INTERP.sub(sub, text)


def parse_params(values: list[str]) -> dict[str, Any]:
    """``k=v`` pairs; numbers and booleans keep their type (``lr=0.1`` is a float)."""
    out: dict[str, Any] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CellInputError(f"--param wants KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[dict[str, bool]]:
    """Hold Ctrl-C / a kernel interrupt until the block ends, so a submit is either sent whole or not at all.

    ``state["hit"]`` says whether an interrupt came meanwhile; the caller then acts on it (the job exists).
    """
    state = {"hit": False}
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def hold(signum: int, frame: Any) -> None:
        state["hit"] = True

    old = signal.signal(signal.SIGINT, hold)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, old if old is not None else signal.default_int_handler)
