"""A task's remote desktop in the browser: ``{base_url}pai/jobs/{user}~{name}/{role}/{index}/desktop/``.

The ``desktop`` runtime plugin runs a VNC display and websockify (serving noVNC) on the task's ``desktop`` port.
Everything under ``desktop/`` is proxied to it like TensorBoard (same auth, origin checks, idle culling, start
on demand) except the page at ``desktop/`` itself, which this server writes: noVNC's RFB client pointed at
``desktop/websockify`` with the task's VNC password in the page (served no-store to the signed-in owner only;
never in a URL, so never in an access log).
"""

from __future__ import annotations

import html
from typing import Any

from .common import TASK_RE, safe_json
from .proxy import ServiceProxyHandler, _is_websocket

DESKTOP_RE = TASK_RE + r"/(?P<service>desktop)(?P<rest>/.*)?"

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>html,body{{margin:0;height:100%;background:#2b2b2b;font:13px sans-serif;color:#ddd}}
#bar{{position:fixed;top:0;right:0;padding:2px 8px;background:rgba(0,0,0,.6);z-index:2}}
#screen{{width:100%;height:100%}}</style></head>
<body data-state="connecting"><div id="bar">{title}: <span id="status">connecting…</span></div>
<div id="screen"></div>
<script type="module">
import RFB from "./core/rfb.js";
const cfg = {config};
const status = document.getElementById("status");
const ws = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + location.pathname + "websockify";
const rfb = new RFB(document.getElementById("screen"), ws, {{credentials: {{password: cfg.password}}}});
rfb.scaleViewport = true;
rfb.addEventListener("connect", () => {{
  status.textContent = "connected"; document.body.dataset.state = "connected";
}});
rfb.addEventListener("disconnect", (e) => {{
  status.textContent = e.detail.clean ? "disconnected" : "connection lost (reload to reconnect)";
  document.body.dataset.state = "disconnected";
}});
rfb.addEventListener("securityfailure", () => {{ status.textContent = "the desktop refused the password"; }});
window.paiDesktop = rfb;
</script></body></html>
"""


class DesktopProxyHandler(ServiceProxyHandler):
    """noVNC's files and websocket from the task; the landing page from here, with the password."""

    async def http_get(self, **kw: Any) -> None:
        if kw.get("rest") in ("/", "/index.html") and not _is_websocket(self):
            await self._page(**kw)
            return
        await super().http_get(**kw)

    async def _page(self, user: str, name: str, role: str, index: str, service: str, rest: str | None) -> None:
        await self._resolve(user, name, role, index, service, rest)  # 404 / 409 / 503 (starting) as for any service
        assert self.target is not None
        self.record_activity()
        title = html.escape(f"Desktop of {user}~{name} {role}[{index}]")
        config = safe_json({"password": str(self.target.token or "")[:8]})
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "no-referrer")
        self.finish(PAGE.format(title=title, config=config))
