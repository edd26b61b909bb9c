"""A task's remote desktop in the browser: ``{base_url}pai/jobs/{user}~{name}/{role}/{index}/desktop/``.

The ``desktop`` runtime plugin runs a VNC display and websockify on the task's ``desktop`` port. Only the
websocket, ``desktop/websockify``, is proxied to it (same auth, origin check, idle culling and start on demand as
TensorBoard). The page at ``desktop/`` is written by this server: noVNC's RFB client pointed at that websocket,
with the task's VNC password in the page (served no-store to the signed-in owner only; never in a URL, so never
in an access log). The page runs on this server's origin, so it loads code from this server only: noVNC's
scripts come from the noVNC installed beside this server (Debian's ``novnc`` package, ``/usr/share/novnc``),
at ``{base_url}pai/novnc/``, never from the task, which could serve a script that reads this server's ``_xsrf``
cookie and opens a terminal here. Nothing else under ``desktop/`` reaches the task.
"""

from __future__ import annotations

import html
import os
import secrets
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

from ..common.services import route_re
from .common import TASK_RE, SafeErrors, not_found, safe_json
from .proxy import ServiceProxyHandler, _is_websocket
from .registry import Registry

DESKTOP_RE = TASK_RE + rf"/(?P<service>{route_re('desktop')})(?P<rest>/.*)?"
NOVNC_DIRS = ("/usr/share/novnc", "/usr/share/webapps/novnc", "/opt/novnc")
NOVNC_RE = r"/novnc/(?P<path>(?:core|vendor)/(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*\.js)"
RECONNECTS = 20  # failed connects in a row before the page stops trying (about 4 minutes)
RELOADS = 3  # times the page loads itself again when noVNC's modules did not load (a request failed)
LOAD_S = 20  # ... or were not all loaded in this many seconds (a request without an answer)
NO_NOVNC = "noVNC is not installed beside this Jupyter server (Debian: apt-get install novnc), so no desktop page"
# the page's own script (by nonce) and noVNC's modules from this server; the websocket to this server; no frames,
# forms or plugins. noVNC draws on a canvas and sets its cursor from data: URLs.
PAGE_CSP = (
    "default-src 'none'; script-src 'self' 'nonce-{nonce}'; connect-src 'self'; img-src 'self' data: blob:; "
    "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>html,body{{margin:0;height:100%;background:#2b2b2b;font:13px sans-serif;color:#ddd}}
#bar{{position:fixed;top:0;right:0;padding:2px 8px;background:rgba(0,0,0,.6);z-index:2}}
#screen{{width:100%;height:100%}}</style></head>
<body data-state="{state}"><div id="bar">{title}: <span id="status">{status}</span></div>
<div id="screen"></div>
{script}</body></html>
"""
SCRIPT = """<script type="module" nonce="{nonce}">
const cfg = {config};
const status = document.getElementById("status");
const screen = document.getElementById("screen");
const ws = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + location.pathname + "websockify";
// A desktop still starting (the tab opened as the job started) or restarted (culled, then started on demand)
// refuses a first try: try again, 1 s then doubling up to 15 s, until a wrong password or too many failures.
let failures = 0;
function connect() {{
  document.body.dataset.state = "connecting";
  const rfb = new RFB(screen, ws, {{credentials: {{password: cfg.password}}}});
  let refused = false;
  rfb.scaleViewport = true;
  rfb.addEventListener("connect", () => {{
    failures = 0; delete document.body.dataset.failures;
    status.textContent = "connected"; document.body.dataset.state = "connected";
  }});
  rfb.addEventListener("securityfailure", () => {{ refused = true; }});
  rfb.addEventListener("disconnect", (e) => {{
    document.body.dataset.state = "disconnected";
    if (refused) {{ status.textContent = "the desktop refused the password"; return; }}
    failures += 1;
    document.body.dataset.failures = String(failures);  // failed tries since the last connect
    if (failures > {tries}) {{ status.textContent = "connection lost (reload to reconnect)"; return; }}
    const wait = Math.min(15, 2 ** (failures - 1));
    status.textContent = (e.detail.clean ? "disconnected" : "connection lost") + `; reconnecting in ${{wait}} s…`;
    setTimeout(connect, wait * 1000);
  }});
  window.paiDesktop = rfb;
}}
// noVNC is some forty modules from this server: one request that failed or never got its answer (a busy server,
// a network blip) leaves the page without them, saying "connecting…" for ever. Load the page again instead, a few
// times, then say so.
const loads = "pai-desktop-loads:" + location.pathname;
function store(f) {{ try {{ return f(sessionStorage); }} catch {{ return null; }} }}
const late = (s) => new Promise((_, no) => setTimeout(() => no(new Error(`not loaded in ${{s}} s`)), s * 1000));
let RFB = null;
try {{
  RFB = (await Promise.race([import({rfb}), late({load_s})])).default;
}} catch (e) {{
  const n = Number(store((s) => s.getItem(loads)) || 0) + 1;
  document.body.dataset.state = "unloaded";
  if (n > {reloads}) {{
    store((s) => s.removeItem(loads));
    status.textContent = `the viewer (noVNC) did not load: ${{e.message}} (reload to try again)`;
  }} else {{
    store((s) => s.setItem(loads, String(n)));
    status.textContent = "the viewer (noVNC) did not load; loading the page again…";
    setTimeout(() => location.reload(), 1000 * n);
  }}
}}
if (RFB) {{ store((s) => s.removeItem(loads)); connect(); }}
</script>"""


def novnc_dir(configured: str = "") -> Path | None:
    """The installed noVNC (a directory with ``core/rfb.js``): the configured one, else the first of NOVNC_DIRS."""
    for d in (configured,) if configured else NOVNC_DIRS:
        if d and os.path.isfile(os.path.join(d, "core", "rfb.js")):
            return Path(d).resolve()
    return None


class NoVncHandler(SafeErrors, JupyterHandler, web.StaticFileHandler):
    """noVNC's scripts (``core/`` and ``vendor/``, ``.js`` only) from the installed noVNC, behind Jupyter's auth."""

    def initialize(self, path: str, default_filename: str | None = None) -> None:  # type: ignore[override]
        web.StaticFileHandler.initialize(self, path, default_filename)

    @web.authenticated
    async def get(self, path: str, include_body: bool = True) -> None:  # type: ignore[override]
        await web.StaticFileHandler.get(self, path, include_body)

    def head(self, path: str) -> Any:
        return self.get(path, include_body=False)

    def get_content_type(self) -> str:
        return "text/javascript; charset=utf-8"


class NoNoVncHandler(SafeErrors, JupyterHandler):
    """Where no noVNC is installed: 404 with the reason (after auth)."""

    @web.authenticated
    def get(self, path: str) -> None:
        raise not_found(NO_NOVNC)

    head = get


class DesktopProxyHandler(ServiceProxyHandler):
    """The landing page from here, with the password; the task's websocket; nothing else."""

    novnc: Path | None = None

    def initialize(self, registry: Registry, novnc: Path | None = None) -> None:
        super().initialize(registry)
        self.novnc = novnc

    async def http_get(self, **kw: Any) -> None:
        if kw.get("rest") in ("/", "/index.html") and not _is_websocket(self):
            await self._page(**kw)
            return
        await self._forward(**kw)

    async def _forward(self, user: str, name: str, role: str, index: str, service: str, rest: str | None) -> None:
        """No HTTP reaches the task: what it would serve could run on this origin."""
        if rest is None and self.request.method in ("GET", "HEAD"):
            await super()._forward(user, name, role, index, service, rest)  # .../desktop -> .../desktop/
            return
        raise not_found("the desktop serves its page and its websocket only")

    async def _resolve(self, user: str, name: str, role: str, index: str, service: str, rest: str | None) -> str:
        if _is_websocket(self) and rest != "/websockify":
            raise not_found("the desktop's websocket is desktop/websockify")
        return await super()._resolve(user, name, role, index, service, rest)

    async def _page(self, user: str, name: str, role: str, index: str, service: str, rest: str | None) -> None:
        await self._resolve(user, name, role, index, service, rest)  # 404 / 409 / 503 (starting) as for any service
        assert self.target is not None
        self.record_activity()
        title = html.escape(f"Desktop of {user}~{name} {role}[{index}]")
        nonce = secrets.token_urlsafe(18)
        if self.novnc is None:
            script, state, status = "", "unavailable", html.escape(NO_NOVNC)
        else:
            rfb = safe_json(url_path_join(self.base_url, "pai/novnc/core/rfb.js"))
            config = safe_json({"password": str(self.target.token or "")[:8]})
            script = SCRIPT.format(
                nonce=nonce, rfb=rfb, config=config, tries=RECONNECTS, reloads=RELOADS, load_s=LOAD_S
            )
            state, status = "connecting", "connecting…"
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("Content-Security-Policy", PAGE_CSP.format(nonce=nonce))
        self.finish(PAGE.format(title=title, state=state, status=status, script=script))
