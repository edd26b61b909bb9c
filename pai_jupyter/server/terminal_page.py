"""The browser page of a task's terminal: ``{base_url}pai/jobs/{user}~{name}/{role}/{index}/terminal/``.

A small HTML page with xterm.js (bundled from npm into ``static/terminal/`` by the labextension's build) that
speaks terminado's protocol to this server's ``…/terminal/websocket`` (``terminal.py``), so it works in plain
Jupyter Server, Notebook 7, JupyterLab and under JupyterHub's ``/user/<name>/`` prefix alike. Job names and
roles reach the page only HTML-escaped, or inside inert JSON.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import AuthenticatedFileHandler, JupyterHandler
from tornado import web

from ..client import PaiError
from .common import TASK_RE, SafeErrors, not_found, safe_json, task_prefix, unavailable
from .registry import Registry

STATIC = Path(__file__).parent / "static"
TERMINAL_PAGE_RE = TASK_RE + r"/terminal/?"
STATIC_RE = r"/static/(?P<path>terminal/[A-Za-z0-9_.-]+)"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="{static}terminal/terminal.css">
<style>
html, body {{ height: 100%; margin: 0; background: #fff; color: #111; font: 13px system-ui, sans-serif; }}
@media (prefers-color-scheme: dark) {{ html, body {{ background: #111; color: #ddd; }} }}
body {{ display: flex; flex-direction: column; }}
header {{ padding: 4px 8px; display: flex; gap: 1em; align-items: baseline; border-bottom: 1px solid #8884; }}
h1 {{ font-size: 13px; margin: 0; font-weight: 600; }}
#pai-terminal {{ flex: 1; min-height: 0; padding: 4px; }}
</style></head>
<body>
<header><h1>{title}</h1><span id="pai-terminal-status" role="status" aria-live="polite">{status}</span></header>
<main id="pai-terminal" aria-label="{title}"></main>
<script type="application/json" id="pai-terminal-config">{config}</script>
<script src="{static}terminal/terminal.js"></script>
</body></html>
"""

MISSING = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Terminal page not built</title></head>
<body><h1>The terminal page's scripts are not built</h1><p>This installation of pai_jupyter has no
<code>pai_jupyter/server/static/terminal/terminal.js</code>. Install the package with
<code>pip install .</code> or <code>pip install -e .</code> (which run the labextension's npm build), or run
<code>npm ci &amp;&amp; npm run build</code> in <code>labextension/</code>. The task's terminal websocket is at
<code>{websocket}</code>.</p></body></html>
"""


def built() -> bool:
    return (STATIC / "terminal" / "terminal.js").is_file()


class TerminalPageHandler(SafeErrors, JupyterHandler):
    """The page; the terminal itself is the websocket next to it."""

    def initialize(self, registry: Registry) -> None:
        self.registry = registry

    @web.authenticated
    async def get(self, user: str, name: str, role: str, index: str) -> None:
        job = self.registry.job_id(user, name)
        try:
            detail = await self.registry.client.detail(job)
        except PaiError as exc:
            raise unavailable(exc) from None
        task = next((t for t in detail.tasks if t.role == role and t.task_index == int(index)), None)
        if task is None:
            raise not_found()
        if not self.request.path.endswith("/"):  # relative URLs below need the trailing slash
            self.redirect(self.request.path + "/" + (f"?{self.request.query}" if self.request.query else ""))
            return
        websocket = task_prefix(self.base_url, user, name, role, int(index)) + "terminal/websocket"
        title = f"Terminal: {role}[{index}] of {job}"
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        if not built():
            self.set_status(503)
            self.finish(MISSING.format(websocket=html.escape(websocket)))
            return
        state = task.task_state or ""
        config = {"websocketPath": websocket, "title": title, "taskState": state}
        status = "Connecting…" if state == "RUNNING" else f"The task is {state}: a terminal needs a running task."
        static = self.base_url.rstrip("/") + "/pai/static/"
        self.finish(
            PAGE.format(
                title=html.escape(title),
                status=html.escape(status),
                config=safe_json(config),
                static=html.escape(static),
            )
        )


class PaiStaticHandler(AuthenticatedFileHandler):
    """The built page assets (only files directly under ``static/terminal/``), behind Jupyter's login."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(
            safe_json(
                {
                    "code": "NotFound" if status_code == 404 else "Error",
                    "message": "no such file" if status_code == 404 else "error",
                }
            )
        )


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    """The page and its assets, to register before the task proxy's catch-alls."""
    return [
        (pai + "/jobs/" + TERMINAL_PAGE_RE, TerminalPageHandler, args),
        (pai + STATIC_RE, PaiStaticHandler, {"path": str(STATIC)}),
    ]
