"""HTTP and websocket proxy to a task's Jupyter and TensorBoard, by subclassing jupyter-server-proxy.

jupyter-server-proxy's ProxyHandler gives the auth-in-prepare, origin checks and the websocket relay; HTTP goes
through ``forward`` (streaming, encodings kept) instead of its buffered fetch.

``{base_url}pai/jobs/{user}~{name}/{role}/{index}/{jupyter|tensorboard}/{path}`` goes to the host and port the
cluster lists for that task's declared service — the route cannot name a host or port at all. The request
path after the service name is forwarded under the path the service expects (``basePath``: ``/`` for
TensorBoard, which uses relative URLs; the full ``/pai/jobs/.../jupyter/`` for the in-task Jupyter, whose
token the proxy adds, and whose pages get this server's base_url put in front of that path when it is not
"/"). TensorBoard's page names its fonts at the server root: they are made relative. The browser's own
Jupyter credentials (Authorization header, cookies, ``token`` query parameter) never reach the task, and the
task sets no cookie here. Every answer is sandboxed into an opaque origin, and a browser's pages are served
under a capability (``sandbox.py``, ``sandboxed.py``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from jupyter_server_proxy.handlers import ProxyHandler
from tornado import web
from tornado.httputil import HTTPHeaders

from ..common.services import route_re
from . import sandbox
from .common import TASK_RE, PaiHTTPError, SafeErrors, cross_origin_is_403, not_found
from .forward import Relaying, UpstreamFailed, forward
from .registry import TITLES, Key, Registry, Target

SAFE_PATH = "/:@!$&'()*+,;=-._~%"  # keep the request's own percent-escapes as they came
DROP_HEADERS = ("Authorization", "Cookie", "X-Xsrftoken", "X-Xsrf-Token")
SERVICE_RE = TASK_RE + rf"/(?P<service>{route_re('http')})(?P<rest>/.*)?"
DROP_ANSWER_HEADERS = ("Set-Cookie", "Clear-Site-Data")  # a task sets no cookie on, nor clears, this origin
NOT_RUNNING_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}: not running</title></head>
<body style="font-family:sans-serif;max-width:40em;margin:2em auto"><h2>{title} of {task} is not running</h2>
<p>{message}.</p><p>A task's {title} lives only as long as its task: once the task has ended (or before it
has started) there is nothing to open. Its logs and files stay: <code>pai logs</code>, <code>%pai_logs</code> or the
job list's "logs" action show them.</p></body></html>"""
TENSORBOARD_FONTS = ("url(/font-roboto/", "url(font-roboto/")  # relative: under .../tensorboard/ like the page
ACTIVITY_SOURCE = "pai_jupyter"  # our key in Jupyter's settings["last_activity_times"] (read by its idle culling)


def _is_websocket(handler: web.RequestHandler) -> bool:
    return handler.request.method == "GET" and handler.request.headers.get("Upgrade", "").lower() == "websocket"


def without_token(query: str) -> str:
    """The query string minus ``token=`` (the browser's Jupyter token stays with this server)."""
    return "&".join(p for p in query.split("&") if p and p.split("=", 1)[0] != "token")


def _activity_hook(handler: TaskProxyBase) -> bool:
    return handler.proxied_activity()


class TaskProxyBase(SafeErrors, Relaying, ProxyHandler):
    """Authentication on every request (websocket upgrades too), JSON errors, activity for idle culling."""

    registry: Registry
    key: Key | None = None
    backend_path = "/"
    backend_query = ""

    def initialize(self, registry: Registry) -> None:
        self.registry = registry
        # jupyter-server-proxy's public hook (>= 4.6): called with the handler on every websocket message and ping
        # it relays; when it returns True, Jupyter's activity clock (settings["last_activity_times"]) is stamped
        self.update_last_activity = _activity_hook

    def proxied_activity(self) -> bool:
        """Traffic through this handler: the registry's clock for idle culling. True: Jupyter's counts it too."""
        self.registry.touch(self.key)
        return True

    def record_activity(self) -> None:
        """The same for a request our own HTTP relay (``forward``) carries: jupyter-server-proxy's HTTP path, which
        would stamp Jupyter's clock, is not used, so this stamps it under our own name (the place Jupyter keeps
        for extensions' activity)."""
        if self.proxied_activity():
            self.settings.setdefault("last_activity_times", {})[ACTIVITY_SOURCE] = datetime.now(timezone.utc)

    async def prepare(self, *args: Any, **kwargs: Any) -> None:
        """Jupyter's auth before anything else: 403 for a websocket upgrade, login redirect or 403 otherwise
        (as jupyter-server-proxy >= 4.1.1 does; GHSA-w3vc-fx9p-wp4v). Unlike jupyter-server-proxy, cookie-
        authenticated writes are checked here: the in-task Jupyter gets our token, so it cannot tell a forged
        cross-site request from the user's own, and needs our XSRF token; TensorBoard's own pages POST their
        data queries without one, so for it the request must come from this server's origin (a browser always
        says where a POST comes from)."""
        ws = _is_websocket(self)
        await JupyterHandler.prepare(self, _redirect_to_login=not ws)
        if self._finished:
            return
        if not self.current_user:
            if ws:
                raise web.HTTPError(403)
            web.authenticated(lambda handler: None)(self)
            return
        if self.request.method not in ("GET", "HEAD", "OPTIONS"):
            if self.path_kwargs.get("service") != "tensorboard":
                cross_origin_is_403(lambda: JupyterHandler.check_xsrf_cookie(self))
            elif not self.token_authenticated and not (
                self.request.headers.get("Origin") and JupyterHandler.check_origin(self)
            ):
                raise web.HTTPError(403, "a cross-origin write to TensorBoard was refused")
        elif not ws:
            self.xsrf_token  # noqa: B018  (sets this server's _xsrf cookie, which a task's Jupyter page sends back)

    def get_client_uri(self, protocol: str, host: str, port: Any, proxied_path: str) -> str:
        path = quote(proxied_path if proxied_path.startswith("/") else "/" + proxied_path, safe=SAFE_PATH)
        return urlunsplit((protocol, f"{host}:{port}", path, self.backend_query, ""))

    def proxy_request_headers(self) -> Any:
        headers = self.request.headers.copy()
        for name in DROP_HEADERS:
            headers.pop(name, None)
        if getattr(self, "cap", None):  # the page's opaque origin ("null"), which the in-task Jupyter would refuse:
            headers.pop("Origin", None)  # the capability vouches for the request
        headers.update(self.get_request_headers_override())
        return headers

    def on_close(self) -> None:
        super().on_close()
        self.registry.socket_closed(self.key, self)


class ServiceProxyHandler(TaskProxyBase):
    """A task's Jupyter or TensorBoard, HTTP and websocket."""

    target: Target | None = None
    route_re = SERVICE_RE
    under = "/pai/jobs/"  # where route_re starts below base_url
    cap: str | None = None  # the capability in the path (SandboxedProxyHandler)

    def raw_match(self, route_re: str) -> re.Match[str] | None:
        """``route_re`` matched against the request's path as it came (its own percent-escapes kept)."""
        return re.match(re.escape(self.base_url.rstrip("/")) + self.under + route_re, self.request.path)

    async def capability_route(self) -> str:
        """What a capability for this request is bound to (``sandbox.route``)."""
        kw = self.path_kwargs
        return sandbox.route(kw, await self.registry.stamp(kw["user"], kw["name"]))

    async def _resolve(self, user: str, name: str, role: str, index: str, service: str, rest: str | None) -> str:
        """Find the service (404/409/503 before any upgrade) and return the path to ask it for."""
        self.key, target = await self.registry.resolve(user, name, role, int(index), service)
        self.target = target
        raw = self.raw_match(self.route_re)
        raw_rest = raw.group("rest") if raw else rest
        self.proxy_base = self.request.path[len(self.base_url) : len(self.request.path) - len(raw_rest or "")]
        self.absolute_url = target.base_path != "/"
        self.host_allowlist = [target.host]
        self.backend_query = without_token(self.request.query)
        return target.base_path.rstrip("/") + (raw_rest or "/")

    def get_request_headers_override(self) -> dict[str, str]:
        if self.target is not None and self.target.token:
            return {"Authorization": f"token {self.target.token}"}
        return {}

    def _rewrite(self, code: int, headers: HTTPHeaders) -> None:
        """Redirects inside the service's base path go to the same place under our public prefix; a task sets
        no cookies here (a task's Jupyter is authenticated by our token; its _xsrf would shadow ours). Every answer
        gets the sandbox in place of the service's own CSP (which could refuse the shim's blob: worker) and, under a
        capability, may be read by the page's opaque origin (the capability is the credential)."""
        target = self.target
        if target is None:
            return
        for name in DROP_ANSWER_HEADERS:
            headers.pop(name, None)
        headers.pop("Content-Security-Policy", None)
        headers["Content-Security-Policy"] = sandbox.SANDBOX_CSP
        headers["Referrer-Policy"] = "no-referrer"  # the capability in the URL goes nowhere else
        if self.cap:
            headers["Access-Control-Allow-Origin"] = "*"
        location = headers.get("Location")
        if not location or code not in (301, 302, 303, 307, 308):
            return
        parts = urlsplit(location)
        if not parts.scheme and not parts.netloc and parts.path.startswith(target.base_path):
            public = self.base_url.rstrip("/") + "/" + self.proxy_base.strip("/") + "/"
            headers["Location"] = urlunsplit(
                ("", "", public + parts.path[len(target.base_path) :], parts.query, parts.fragment)
            )

    async def _forward(self, user: str, name: str, role: str, index: str, service: str, rest: str | None) -> None:
        if rest is None:  # .../tensorboard -> .../tensorboard/
            if self.request.method in ("GET", "HEAD"):
                query = f"?{self.request.query}" if self.request.query else ""
                self.redirect(self.request.path + "/" + query)
                return
            raise not_found()
        tried: Target | None = None
        for _ in range(2):  # a refused connection asks the cluster again: a task that has ended is a 409 (its page)
            path = await self._resolve(user, name, role, index, service, rest)
            assert self.target is not None and self.key is not None
            if self.target == tried:  # the cluster still lists it there
                break
            tried = self.target
            try:
                await self._relay(path)
                return
            except UpstreamFailed as exc:
                self.log.info("pai: %s of %s did not answer: %s", service, self.key, exc)
                self.registry.forget(self.key)
        raise PaiHTTPError(
            503,
            f"{TITLES[service]} of this task did not answer; it may be restarting, try again in a few seconds",
            retry_after=2,
            code="NotAnswering",
        )

    async def _relay(self, path: str) -> None:
        """Forward the request to ``path`` of the resolved service; UpstreamFailed when nothing came back."""
        assert self.target is not None
        url = self.get_client_uri("http", self.target.host, self.target.port, path)
        headers = self.proxy_request_headers()
        if not self.absolute_url:  # what jupyter-server-proxy tells apps served under a prefix
            context = url_path_join(self.base_url, self.proxy_base)
            headers.update(
                {"X-Forwarded-Context": context, "X-ProxyContextPath": context, "X-Forwarded-Prefix": context}
            )
        public = self.base_url.rstrip("/") + "/" + self.proxy_base.strip("/") + "/"
        # kernel specs list their logos by absolute URL; other API bodies may hold user content: left alone
        specs = self.absolute_url and path.startswith(self.target.base_path + "api/kernelspecs")
        pages = self._page_rewrite(public, json=specs)
        self.record_activity()
        await forward(self, url, headers, self._rewrite, rewrite_page=pages, json_too=specs and pages is not None)
        self.record_activity()

    def _page_rewrite(self, public: str, json: bool) -> Callable[[bytes], bytes] | None:
        """How the service's pages change on their way (``forward``'s ``rewrite_page``): the in-task Jupyter's
        base path gets our base_url and the capability in front; TensorBoard's fonts, asked for at the server's
        root, are made relative; a page served under a capability gets the sandbox's shim first."""
        assert self.target is not None
        if self.absolute_url:
            old, new = self.target.base_path.encode(), public.encode()
        else:
            old, new = TENSORBOARD_FONTS[0].encode(), TENSORBOARD_FONTS[1].encode()
        shim = public + sandbox.SHIM_NAME if self.cap and not json else None
        if old == new and shim is None:
            return None

        def rewrite(page: bytes) -> bytes:
            page = page.replace(old, new)
            return sandbox.inject_shim(page, shim) if shim else page

        return rewrite

    async def _to_capability(self) -> bool:
        """A browser opening a sandboxed service's page (a navigation, signed in) goes to it under a fresh
        capability, so that the page's own requests, which carry no cookie, are let through."""
        if self.cap or self.request.headers.get("Sec-Fetch-Mode") != "navigate":
            return False
        raw = self.raw_match(self.route_re)
        if raw is None or raw.group("rest") is None:
            return False  # .../tensorboard: to .../tensorboard/ first (_forward)
        path, at = self.request.path, raw.start("rest")
        query = without_token(self.request.query)  # the page can read its URL: not this server's token
        query = f"?{query}" if query else ""
        route = await self.capability_route()
        self.redirect(f"{path[:at]}/~{sandbox.issue(route)}{path[at:]}{query}")
        return True

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """A browser opening the page of a task that is not running (409) gets a page that says so, not JSON."""
        exc = (kwargs.get("exc_info") or (None, None, None))[1]
        if (
            status_code == 409
            and isinstance(exc, PaiHTTPError)
            and self.request.method == "GET"
            and not _is_websocket(self)
            and "text/html" in self.request.headers.get("Accept", "")
        ):
            self.set_header("X-Content-Type-Options", "nosniff")
            self.set_header("Cache-Control", "no-store")
            self.set_header("Content-Type", "text/html; charset=utf-8")
            kw = self.path_kwargs
            task = f"{kw.get('user')}~{kw.get('name')} {kw.get('role')}[{kw.get('index')}]"
            self.finish(
                NOT_RUNNING_PAGE.format(
                    title=html.escape(TITLES.get(kw.get("service", ""), "Service")),
                    task=html.escape(task),
                    message=html.escape(exc.message),
                )
            )
            return
        super().write_error(status_code, **kwargs)

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        if _is_websocket(self):  # resolve first, so a missing job or service is a plain 404 and not an upgrade
            self.backend_path = await self._resolve(**kwargs)
        await super().get(*args, **kwargs)  # jupyter-server-proxy: the upgrade, or http_get

    async def http_get(self, **kw: Any) -> None:
        if not await self._to_capability():
            await self._forward(**kw)

    async def open(self, **kw: Any) -> None:
        assert self.target is not None and self.key is not None
        try:
            await self.proxy_open(self.target.host, self.target.port, self.backend_path)
        except Exception as exc:
            self.log.info("pai: websocket to %s failed: %s", self.key, exc)
            self.registry.forget(self.key)
            self.close(1011, "the task's service did not accept the websocket")
            return
        self.registry.socket_opened(self.key, self)

    @web.authenticated
    async def post(self, **kw: Any) -> None:
        await self._forward(**kw)

    @web.authenticated
    async def put(self, **kw: Any) -> None:
        await self._forward(**kw)

    @web.authenticated
    async def delete(self, **kw: Any) -> None:
        await self._forward(**kw)

    @web.authenticated
    async def patch(self, **kw: Any) -> None:
        await self._forward(**kw)

    @web.authenticated
    async def head(self, **kw: Any) -> None:
        await self._forward(**kw)

    @web.authenticated
    async def options(self, **kw: Any) -> None:
        await self._forward(**kw)


class PaiNotFound(SafeErrors, JupyterHandler):
    """Anything else under ``pai/``: authenticated first, then a 404 that echoes nothing."""

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        raise not_found("no such route")

    get = web.authenticated(_nothing)
    post = put = delete = patch = head = options = get
