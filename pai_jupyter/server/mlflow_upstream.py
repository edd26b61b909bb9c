"""Where the profile user's MLflow server is and their credentials for it (``AsyncClient.tracking``), asked of the
cluster once per ``resolve_cache_seconds``: the upstream of the Lab's MLflow tab (``mlflow_proxy.py``) and what the
job page says when the cluster tracks nothing (how to turn tracking on)."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..client import NotSupported, PaiError
from .common import PaiHTTPError, unavailable

if TYPE_CHECKING:
    from .registry import Registry

TURN_ON = (
    "Jobs are not MLflow runs on this cluster. To make every job a run: pip install 'pai_jupyter[mlflow]', then "
    "pai cluster stop && pai cluster start --mlflow on (docs/tracking.md)"
)


@dataclass(frozen=True)
class Upstream:
    """The cluster's MLflow server as the profile user reaches it."""

    host: str
    port: int
    username: str
    authorization: str | None  # ``Basic …`` with the user's own MLflow password (None: a server without any)
    experiment_id: str


class TrackingServer:
    """Where the profile user's MLflow server is, asked of the cluster once per ``resolve_cache_seconds``."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._cached: tuple[float, str, Upstream] | None = None  # (when, profile, upstream)
        self._off: tuple[float, str, str | None] | None = None  # (when, profile, the hint) while tracking is off

    async def upstream(self) -> Upstream:
        """The server and the user's credentials; 404 where the cluster tracks nothing (with the cluster's words:
        how to turn tracking on), 503 where the cluster is down."""
        registry = self.registry
        now = time.monotonic()
        cached = self._cached
        if cached and cached[1] == registry.current and now - cached[0] < registry.config.resolve_cache_seconds:
            return cached[2]
        try:
            answer = await registry.client.tracking()
        except PaiError as exc:
            if isinstance(exc, NotSupported):
                raise PaiHTTPError(501, f"no MLflow here: {exc.message}", code="NotSupported") from None
            if exc.status == 404:
                raise PaiHTTPError(404, f"MLflow tracking is off: {exc.message}", code="NoTracking") from None
            raise unavailable(exc) from None
        url = urlsplit(answer.url)
        if url.scheme != "http" or not url.hostname:
            raise PaiHTTPError(
                502, f"the Lab's MLflow tab opens an http:// server; open {answer.url} itself", code="NotHttp"
            )
        basic = None
        if answer.password:  # (a site's server without authentication: none)
            basic = "Basic " + base64.b64encode(f"{answer.username}:{answer.password}".encode()).decode()
        found = Upstream(
            url.hostname,
            url.port or 80,
            str(answer.username),
            basic,
            answer.experiment_id or "",
        )
        self._cached = (now, registry.current, found)
        return found

    def forget(self) -> None:
        self._cached = None

    async def hint(self) -> str | None:
        """What the job page says of a job without a run: how to turn tracking on where the cluster tracks nothing;
        None where it does (that job has no run of its own), and on a remote OpenPAI (no tracking there)."""
        registry, now = self.registry, time.monotonic()
        off = self._off
        if off and off[1] == registry.current and now - off[0] < registry.config.resolve_cache_seconds:
            return off[2]
        try:
            await self.upstream()
            said: str | None = None
        except PaiHTTPError as exc:
            said = TURN_ON if exc.code == "NoTracking" else None
        self._off = (now, registry.current, said)
        return said
