"""What the job and profile commands share: --profile, error handling with exit codes, tables, status lines."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..common.format import fmt

if TYPE_CHECKING:
    from ..client import Client

EXIT_OK, EXIT_JOB_FAILED, EXIT_BAD_INPUT, EXIT_UNAVAILABLE = 0, 1, 2, 3
F = TypeVar("F", bound=Callable[..., Any])

profile_option = click.option(
    "--profile", "-p", envvar="PAI_PROFILE", help="Cluster profile (default: the default one)."
)
output_option = click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json prints machine-readable output.",
)


def handle_errors(fn: F) -> F:
    """Turn client errors into one clear line on stderr and the documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ..client import PaiError  # imported here: `pai --help` stays fast

        try:
            return fn(*args, **kwargs)
        except PaiError as exc:
            problems = getattr(exc, "problems", [])
            if problems:
                click.echo(f"pai: invalid job ({len(problems)} problem{'s' * (len(problems) != 1)})", err=True)
                for p in problems:
                    where = f"{p.get('path')}: " if p.get("path") else ""
                    click.echo(f"  - {where}{p.get('message')}", err=True)
            else:
                click.echo(f"pai: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("\npai: interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def client_for(profile: str | None) -> Client:
    from ..client import Client

    return Client(profile)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[fmt(c, "-") for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


class StatusLine:
    """A live line on a terminal (rewritten in place); plain lines, only on change, when piped."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = ""

    def show(self, text: str) -> None:
        if self.tty:
            click.echo("\r\x1b[2K" + text, nl=False, err=True)
        elif text.split(" (")[0] != self.last.split(" (")[0]:
            click.echo(text, err=True)
        self.last = text

    def done(self) -> None:
        if self.tty and self.last:
            click.echo("", err=True)
