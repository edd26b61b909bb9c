"""What every handler of the daemon's REST API shares: bearer-token authentication (also a linked JupyterHub's
tokens: hubauth.py), who may see which job, JSON answers and errors (``ApiError`` -> OpenPAI's ``{"code",
"message"}``), argument parsing, and the route shapes."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import tornado.httputil
import tornado.web

from ...common.origin import HEADER as ORIGIN_HEADER
from ...common.origin import decode as decode_origin
from ...protocol import Job
from ..core.errors import ApiError, BadRequest, NoJobError, UnauthorizedUserError
from ..core.hub import HubLink
from ..core.space import is_full
from ..core.store import APPLICATION, JobWithConfig, TokenUser
from ..core.store.tracking import TrackedRun
from . import peer
from .hubauth import hub_user

if TYPE_CHECKING:
    from ..core.service import Cluster

JOB = r"/api/v2/jobs/([^/~]+)~([^/]+)"
Route = tuple[str, type[tornado.web.RequestHandler], dict[str, Any]]  # a pattern, its handler, its arguments
MAX_INT = 2**31 - 1  # attempt and task numbers, offsets: anything larger is no real one (and overflows SQLite)
HUB = "pai_hub"  # the application setting holding the JupyterHub link (core/hub.py), None when there is none


def request_token(request: tornado.httputil.HTTPServerRequest, cluster: Cluster) -> str | None:
    """The token a request carries: ``Bearer <token>`` (or ``token <token>``, JupyterHub's way), or (OpenPAI's
    way for application tokens only) ``Basic base64(<user>:<application token>)``."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() in ("bearer", "token") and token:
        return token
    if scheme.lower() == "basic" and token:
        try:
            name, _, secret = base64.b64decode(token, validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        owner = cluster.store.user_for_token(secret) if secret else None
        if owner is not None and owner["name"] == name and cluster.store.token_label(secret) == APPLICATION:
            return secret
    return None


async def authenticate(
    request: tornado.httputil.HTTPServerRequest, cluster: Cluster, hub: HubLink | None = None
) -> TokenUser:
    """The user of the request's token (``request_token``), one of the store's or, when a JupyterHub is linked
    (``hub``), one the Hub vouches for; 401 without one or with a wrong one, 403 for the owner's token from another
    account over the socket (``peer``)."""
    token = request_token(request, cluster)
    user = cluster.store.user_for_token(token) if token else None
    if user is None and token and hub is not None:
        user = await hub_user(hub, cluster, token)
    if user is None or token is None:
        raise UnauthorizedUserError("a valid bearer token is required (Authorization: Bearer <token>)")
    peer.refuse_a_leaked_owner_token(request, cluster.store, token)
    return user


def visible_job(cluster: Cluster, viewer: TokenUser, user: str, name: str) -> JobWithConfig:
    """The job, if this viewer may see it; someone else's job is as absent as a missing one."""
    if user != viewer["name"] and not viewer["admin"]:
        raise NoJobError(f"job {user}~{name} was not found")
    return cluster.get_job(user, name)


class Base(tornado.web.RequestHandler):
    cluster: Cluster
    user: TokenUser
    public = False

    def initialize(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")

    async def prepare(self) -> None:
        if not self.public:
            self.user = await authenticate(self.request, self.cluster, self.hub)

    @property
    def hub(self) -> HubLink | None:
        """The linked JupyterHub, if the daemon has one (core/hub.py)."""
        hub = self.settings.get(HUB)
        return hub if isinstance(hub, HubLink) else None

    @property
    def is_admin(self) -> bool:
        return bool(self.user["admin"])

    def write_json(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(data))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            body = exc.body()
            for name, value in exc.headers.items():  # (send_error cleared the headers set before)
                self.set_header(name, value)
        elif isinstance(exc, tornado.web.HTTPError) and status_code == 405:
            body = {"code": "MethodNotAllowedError", "message": f"{self.request.method} is not allowed here"}
        else:
            body = {"code": "UnknownError", "message": f"HTTP {status_code}: {self._reason}"}
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(body))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, ApiError) or is_full(value):
            return
        super().log_exception(typ, value, tb)

    def _handle_request_exception(self, e: BaseException) -> None:
        if is_full(e):  # a full disk is a 507 that says where, not a 500
            e = self.cluster.space.error(f"{self.request.method} {self.request.path} failed")
        if isinstance(e, ApiError):
            if self._finished:
                return
            self.send_error(e.status, exc_info=(type(e), e, None))
            return
        super()._handle_request_exception(e)

    def own_job(self, user: str, name: str) -> JobWithConfig:
        return visible_job(self.cluster, self.user, user, name)

    async def submit(self, body: bytes, job: Job) -> dict[str, Any]:
        """Submit ``job`` as this user, with its MLflow run made first where tracking is on (a run whose
        submission is then refused is deleted)."""
        tracker = self.cluster.state.tracker
        origin = decode_origin(self.request.headers.get(ORIGIN_HEADER))  # where it came from: the run's tags
        run = await tracker.open_run(self.user["name"], job, origin) if tracker is not None else None
        try:
            return self.cluster.submit(self.user["name"], body, admin=self.is_admin, job=job, run=run)
        except Exception:
            if tracker is not None and isinstance(run, TrackedRun):
                await tracker.discard(run)
            raise

    def json_body(self) -> dict[str, Any]:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            raise BadRequest("the body must be a JSON object") from None
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        return body

    def int_arg(self, name: str, default: int, lo: int = 0, hi: int | None = None) -> int:
        raw = self.get_argument(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise BadRequest(f"{name} must be an integer, got {raw!r}") from None
        if value < lo or value > (MAX_INT if hi is None else hi):
            raise BadRequest(f"{name} must be between {lo} and {hi if hi is not None else MAX_INT}")
        return value
