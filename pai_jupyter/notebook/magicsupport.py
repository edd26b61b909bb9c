"""What every magic of this package shares: its line split as a shell would, and the client's and the protocol's
errors shown as output rather than a traceback. A module of its own so that each group of magics (``magics.py``,
``sweepmagic.py``) imports it without importing the other."""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError

from . import display as ui
from .cellinput import CellInputError


def split_args(magic: Any, line: str) -> Any:
    """Parse a magic's line the way a shell would (``--param k="a b"`` is one argument)."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot split the arguments: {exc}") from None
    return magic.parser.parse_args(argv)


def errors_as_output(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Show the client's and the protocol's errors as output (field paths for a bad job), not as a traceback."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        from ..client import PaiError
        from ..client.profiles import ProfileError
        from ..protocol import JobValidationError

        try:
            return fn(self, *args, **kwargs)
        except (JobValidationError, PaiError, ProfileError) as exc:
            problems = getattr(exc, "problems", None)
            if problems:
                ui.show(ui.problems_text(problems), ui.problems_html(problems))
            else:
                ui.show(f"pai: {exc}", ui.error_html(f"pai: {exc}"))
        except CellInputError as exc:
            ui.show(f"pai: {exc}", ui.error_html(f"pai: {exc}"))
        return None

    return wrapper
