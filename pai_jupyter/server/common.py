"""What every handler of the extension shares: errors that never reflect request text, safe JSON, routes.

Error bodies are JSON with fixed messages (or messages built only from values this server checked), and
``<``, ``>``, ``&`` are written as \\u escapes, so nothing a request carries can become markup in a page
(GHSA-fvcq-4x64-hqxr reflected the proxied host into an HTML error page).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from http.client import responses
from typing import Any

from tornado import web

from ..client import JobNotFound, NotSupported, PaiError
from ..client.base import LOCAL_DOWN
from ..common import services
from ..common.routes import job_segment, task_route

JOB_RE = r"(?P<user>[^/~]+)~(?P<name>[^/]+)"
TASK_RE = JOB_RE + r"/(?P<role>[^/]+)/(?P<index>\d{1,9})"
SERVICES = services.names(["http", "desktop"])  # the services this server serves as web pages


class PaiHTTPError(web.HTTPError):
    """An HTTP error whose ``message`` may be shown to the user (it holds no unchecked request text)."""

    def __init__(self, status: int, message: str, *, retry_after: float | None = None, code: str | None = None):
        super().__init__(status, "%s", message)
        self.message = message
        self.retry_after = retry_after
        self.code = code


def not_found(what: str = "no such job, task or service for this server's profile user") -> PaiHTTPError:
    return PaiHTTPError(404, what, code="NotFound")


def safe_json(data: Any) -> str:
    """JSON that is also inert inside HTML (no raw <, >, &)."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def error_body(status: int, exc: BaseException | None) -> dict[str, Any]:
    if isinstance(exc, PaiHTTPError):
        return {"code": exc.code or responses.get(status, "Error").replace(" ", ""), "message": exc.message}
    # anything else (tornado's or jupyter-server-proxy's HTTPError) may carry request text in log_message
    return {"code": responses.get(status, "Error").replace(" ", ""), "message": responses.get(status, "Error")}


WAIT_PAGE = """<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{seconds}">
<title>Starting</title></head><body><p>{message}</p><p>This page reloads itself in {seconds} s.</p></body></html>"""


SECRET_PARAMS = ("token", "auth", "key", "code", "state", "xsrf")  # as Jupyter's access log scrubs them


def masked_uri(uri: str) -> str:
    """``uri`` with the value of every query parameter whose name holds token/auth/key/... written [secret]."""
    path, sep, query = uri.partition("?")
    if not sep:
        return uri
    parts = []
    for part in query.split("&"):
        name, eq, _ = part.partition("=")
        parts.append(f"{name}=[secret]" if eq and any(s in name.lower() for s in SECRET_PARAMS) else part)
    return f"{path}?{'&'.join(parts)}"


def cross_origin_is_403(check: Callable[[], Any]) -> None:
    """Run Jupyter's XSRF check; its answer to a write whose Origin names another site is 404 (which reads as
    "no such job" and hides that a cross-site request was refused): ours is 403, as documented."""
    try:
        check()
    except web.HTTPError as exc:
        if exc.status_code == 404:
            raise PaiHTTPError(403, "a cross-origin write was refused", code="Forbidden") from None
        raise


class SafeErrors(web.RequestHandler):
    """Mixin for JupyterHandler subclasses (listed before it): JSON errors, never the exception's free text. A
    browser asking for a page of a service that is starting gets a small page that reloads itself instead.
    Cross-origin writes are refused with 403 first; log lines about a request show its URL with ``?token=``
    masked."""

    def check_xsrf_cookie(self) -> None:
        cross_origin_is_403(super().check_xsrf_cookie)

    def _request_summary(self) -> str:
        """Tornado's words for a request in an error's log line (its URI raw, token and all), masked."""
        request = self.request
        return f"{request.method} {masked_uri(request.uri or '')} ({request.remote_ip})"

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = (kwargs.get("exc_info") or (None, None, None))[1]
        request = self.request
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")
        if isinstance(exc, PaiHTTPError) and exc.retry_after is not None:
            seconds = max(1, round(exc.retry_after))
            self.set_header("Retry-After", str(seconds))
            if status_code == 503 and request.method == "GET" and "text/html" in request.headers.get("Accept", ""):
                self.set_header("Content-Type", "text/html; charset=utf-8")
                self.finish(WAIT_PAGE.format(seconds=seconds, message=html.escape(exc.message)))
                return
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(safe_json(error_body(status_code, exc)))


def job_path(user: str, name: str) -> str:
    """``user~name`` quoted for a URL path segment."""
    return job_segment(user, name)


def task_prefix(base_url: str, user: str, name: str, role: str, index: int) -> str:
    """The public path of a task under this server: ``{base_url}pai/jobs/{user}~{name}/{role}/{index}/``."""
    return task_route(base_url, user, name, role, index)


def unavailable(exc: PaiError) -> PaiHTTPError:
    """The cluster's refusal, for the browser: 404 for a missing job, 501 where the cluster cannot do it, 503 with
    the client's own words for a local cluster that is not running (how to start it); any other answer of the
    cluster stays in the server's log."""
    if isinstance(exc, JobNotFound):
        return not_found()
    if isinstance(exc, NotSupported):
        return PaiHTTPError(501, f"not available on this cluster profile: {exc.message}", code="NotSupported")
    if exc.code == LOCAL_DOWN:
        return PaiHTTPError(503, exc.message, code=LOCAL_DOWN)
    return PaiHTTPError(
        502, "the cluster did not answer as expected; see the Jupyter server's log", code="ClusterError"
    )
