"""The server extension's routes are documented in one table (docs/server-extension.md, "Routes"): one row for
each route it registers, none for a route it does not."""

from __future__ import annotations

import re
from pathlib import Path

from pai_jupyter.server import routes

DOC = Path(__file__).parents[2] / "docs" / "server-extension.md"
GROUP = re.compile(r"\(\?P<(\w+)>(?:[^()]|\([^()]*\))*\)\??")
ROW = re.compile(r"^\| `(/pai[^`]*)` \|", re.MULTILINE)


def doc_path(pattern: str) -> str:
    """A route's pattern as the table writes it: ``{name}`` for a named group, ``…`` for the rest of a path."""
    p = pattern.replace("(?:/.*)?", "/…")
    p = GROUP.sub(lambda m: "/…" if m.group(1) == "rest" else "{" + m.group(1) + "}", p)
    return p.removesuffix("/?") + ("/" if p.endswith("/?") else "")


def test_every_registered_route_has_a_row_and_every_row_a_route() -> None:
    registered = {doc_path(r[0]) for r in routes("/", None)}
    documented = ROW.findall(DOC.read_text(encoding="utf-8"))
    assert len(documented) == len(set(documented)), "a route has two rows"
    assert set(documented) == registered


def test_the_paths_read_as_the_table_writes_them() -> None:
    """The check can fail: a route the table lacks, written as it would be looked for."""
    assert doc_path("/pai/api/jobs/(?P<user>[^/~]+)~(?P<name>[^/]+)/(?P<action>stop|clone)") == (
        "/pai/api/jobs/{user}~{name}/{action}"
    )
    assert doc_path("/pai/jobs/(?P<user>[^/~]+)~(?P<name>[^/]+)/(?P<role>[^/]+)/(?P<index>\\d{1,9})/terminal/?") == (
        "/pai/jobs/{user}~{name}/{role}/{index}/terminal/"
    )
    assert doc_path("/pai/novnc/(?P<path>(?:core|vendor)/x\\.js)") == "/pai/novnc/{path}"
    assert doc_path("/pai/mlflow(?P<rest>/.*)?") == "/pai/mlflow/…"
    assert "/pai/api/new-thing" not in set(ROW.findall(DOC.read_text(encoding="utf-8")))
