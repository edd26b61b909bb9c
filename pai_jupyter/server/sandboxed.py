"""The proxy under a capability, ``…/{jupyter|tensorboard}/~<cap>/…``: what a sandboxed task page asks for from
its opaque origin, without cookies (``sandbox.py`` says why and how)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from jupyter_server.auth import decorator as auth_decorator
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server_proxy.handlers import ProxyHandler

from ..common.services import route_re
from . import sandbox
from .common import TASK_RE, PaiHTTPError
from .proxy import ServiceProxyHandler, _is_websocket, without_token

SANDBOXED_RE = TASK_RE + rf"/(?P<service>{route_re('http')})/" + sandbox.CAP_RE + r"(?P<rest>/.*)?"
Method = TypeVar("Method", bound=Callable[..., Any])


def allow_unauthenticated(method: Method) -> Method:
    """A handler open without Jupyter's login (it checks a capability itself) in jupyter_server >= 2.13, where
    ServerApp.allow_unauthenticated_access=False refuses every other one; older versions let each handler decide."""
    mark: Callable[[Method], Method] | None = getattr(auth_decorator, "allow_unauthenticated", None)
    return mark(method) if mark is not None else method


def expired() -> PaiHTTPError:
    return PaiHTTPError(403, "this link has expired: open the service again from the job list", code="Expired")


class SandboxedProxyHandler(ServiceProxyHandler):
    """A service under a capability, ``…/{jupyter|tensorboard}/~<cap>/…``: the sandboxed page's own requests and
    websockets, from its opaque origin, without cookies. The capability stands for the login, the XSRF check and
    the websocket's origin check (a page elsewhere cannot know it)."""

    route_re = SANDBOXED_RE

    async def prepare(self, *args: Any, **kwargs: Any) -> None:
        # the host check, and who the browser is: a navigation (a reload) carries the login cookie
        await JupyterHandler.prepare(self, _redirect_to_login=False)
        if self._finished:
            return
        kw = self.path_kwargs
        route = await self.capability_route()
        if sandbox.valid(route, kw["cap"]):
            self.cap = kw["cap"]
            return
        if (
            self.current_user
            and self.request.method == "GET"
            and self.request.headers.get("Sec-Fetch-Mode") == "navigate"
        ):  # expired, or issued before this server restarted: a fresh one
            raw = self.raw_match(self.route_re)
            rest = raw.group("rest") if raw and raw.group("rest") else "/"
            query = without_token(self.request.query)
            query = f"?{query}" if query else ""
            prefix = self.request.path[: raw.start("cap")] if raw else ""
            self.redirect(f"{prefix}{sandbox.issue(route)}{rest}{query}")
            return
        raise expired()

    async def _resolve(self, user: str, name: str, role: str, index: str, service: str, rest: str | None) -> str:
        """As the signed-in proxy's, and the capability checked again against the job the target found belongs to
        (``Target.stamp``): the job may have been deleted and submitted again since ``prepare`` checked it."""
        path = await super()._resolve(user, name, role, index, service, rest)
        assert self.target is not None and self.cap is not None
        if not sandbox.valid(sandbox.route(self.path_kwargs, self.target.stamp), self.cap):
            raise expired()
        return path

    def check_origin(self, origin: str | None = None) -> bool:
        return True  # the page's origin is opaque ("null"); the capability is the credential

    @allow_unauthenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("cap", None)
        if _is_websocket(self):  # as ServiceProxyHandler.get, without Jupyter's login
            self.backend_path = await self._resolve(**kwargs)
            await ProxyHandler.get(self, *args, **kwargs)
            return
        await self.http_get(**kwargs)

    async def http_get(self, **kw: Any) -> None:
        if kw.get("rest") == "/" + sandbox.SHIM_NAME:
            self.set_header("Content-Type", "text/javascript; charset=utf-8")
            self.set_header("Access-Control-Allow-Origin", "*")
            self.set_header("Cache-Control", "no-cache")
            self.finish(sandbox.SHIM)
            return
        await self._forward(**kw)

    async def _forward(self, cap: str | None = None, **kw: Any) -> None:  # type: ignore[override]
        await super()._forward(**kw)

    @allow_unauthenticated
    async def post(self, **kw: Any) -> None:
        await self._forward(**kw)

    @allow_unauthenticated
    async def head(self, **kw: Any) -> None:
        await self._forward(**kw)

    @allow_unauthenticated
    async def put(self, **kw: Any) -> None:
        await self._forward(**kw)

    @allow_unauthenticated
    async def patch(self, **kw: Any) -> None:
        await self._forward(**kw)

    @allow_unauthenticated
    async def delete(self, **kw: Any) -> None:
        await self._forward(**kw)

    @allow_unauthenticated
    async def options(self, **kw: Any) -> None:
        """A CORS preflight from the page (its requests are cross-origin): any method and header it asks for,
        with no credentials (the capability in the path is the credential)."""
        asked = self.request.headers.get("Access-Control-Request-Headers", "")
        self.set_status(204)
        self.set_header("Access-Control-Allow-Origin", "*")
        self.set_header("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, PATCH, DELETE")
        if re.fullmatch(r"[A-Za-z0-9_, -]*", asked):
            self.set_header("Access-Control-Allow-Headers", asked)
        self.set_header("Access-Control-Max-Age", "600")
        self.finish()
