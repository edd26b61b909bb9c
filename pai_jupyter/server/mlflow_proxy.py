"""The cluster's MLflow UI in a Lab tab, ``{base_url}pai/mlflow/``, behind Jupyter's login (docs/tracking.md).

The MLflow server asks every request for a user's own credentials (its basic-auth app); this server gets them, with
the server's address, from the cluster (``AsyncClient.tracking``: the profile user's, the same their tasks get) and
puts them on each request it forwards, so the browser never holds them and sees only the runs MLflow grants that
user. The browser's own Jupyter credentials (Authorization, cookies, ``token``) never reach MLflow.

What the UI shows was written by the user's jobs (run names, params, tags, artifacts: a task's own code), so its
pages are served like a task's TensorBoard: sandboxed into an opaque origin under a capability
(``…/mlflow/~<cap>/…``, ``sandbox.py``), bound to this server's profile user, and a navigation to ``pai/mlflow/``
goes there. The upstream is only ever the address the cluster gave; the route cannot name another.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from jupyter_server.auth.decorator import ws_authenticated
from tornado import web

from .common import PaiHTTPError
from .forward import UpstreamFailed
from .lab_base import LabHandler
from .mlflow_upstream import TrackingServer, Upstream
from .proxy import ServiceProxyHandler, without_token
from .registry import Target
from .sandbox import CAP_RE
from .sandboxed import SandboxedProxyHandler, allow_unauthenticated

MLFLOW_RE = r"mlflow(?P<rest>/.*)?"
SANDBOXED_MLFLOW_RE = r"mlflow/" + CAP_RE + r"(?P<rest>/.*)?"
MAX_COMPARED = 100  # runs in one compare view


def ui_page(base_url: str, route: str) -> str:
    """The MLflow UI's page ``route`` (its own hash route, e.g. ``/experiments/1``) through this server."""
    return f"{base_url.rstrip('/')}/pai/mlflow/#{route}"


def run_page(base_url: str, experiment_id: str | None, run_id: str | None) -> str | None:
    """A job's run in the MLflow UI through this server; None for a job without one."""
    if not experiment_id or not run_id:
        return None
    return ui_page(base_url, f"/experiments/{quote(experiment_id, safe='')}/runs/{quote(run_id, safe='')}")


def compare_page(base_url: str, runs: list[tuple[str, str]]) -> str:
    """MLflow's compare view of ``runs`` ((experiment id, run id) each) through this server."""
    ids = json.dumps([r for _, r in runs], separators=(",", ":"))
    experiments = json.dumps(sorted({e for e, _ in runs}), separators=(",", ":"))
    return ui_page(base_url, f"/compare-runs?runs={quote(ids, safe='')}&experiments={quote(experiments, safe='')}")


class MlflowProxyHandler(ServiceProxyHandler):
    """``pai/mlflow/…``: a navigation goes to the same page under a capability; anything else signed in."""

    route_re = MLFLOW_RE
    under = "/pai/"
    upstream: Upstream | None = None

    @property
    def tracking(self) -> TrackingServer:
        return self.registry.mlflow

    async def capability_route(self) -> str:
        return f"mlflow@{(await self.tracking.upstream()).username}"

    async def _resolve(self, rest: str | None = None, **_: Any) -> str:  # type: ignore[override]
        self.upstream = await self.tracking.upstream()
        self.target = Target(self.upstream.host, self.upstream.port, "/", stamp=self.upstream.username)
        raw = self.raw_match(self.route_re)
        raw_rest = raw.group("rest") if raw else rest
        self.proxy_base = self.request.path[len(self.base_url) : len(self.request.path) - len(raw_rest or "")]
        self.absolute_url = False
        self.host_allowlist = [self.target.host]
        self.backend_query = without_token(self.request.query)
        return raw_rest or "/"

    def get_request_headers_override(self) -> dict[str, str]:
        if self.upstream is None or self.upstream.authorization is None:
            return {}
        return {"Authorization": self.upstream.authorization}

    def proxy_request_headers(self) -> Any:
        headers = super().proxy_request_headers()
        headers.pop("Origin", None)  # the sandboxed page's ("null"); this server checked the request already
        headers["Host"] = f"{self.target.host}:{self.target.port}" if self.target else headers.get("Host", "")
        return headers

    async def _forward(self, rest: str | None = None, cap: str | None = None, **_: Any) -> None:  # type: ignore[override]
        if rest is None:  # .../mlflow -> .../mlflow/
            if self.request.method in ("GET", "HEAD"):
                query = f"?{self.request.query}" if self.request.query else ""
                self.redirect(self.request.path + "/" + query)
                return
            raise PaiHTTPError(404, "no such route", code="NotFound")
        for again in (False, True):
            path = await self._resolve(rest)
            try:
                await self._relay(path)
                return
            except UpstreamFailed as exc:
                self.log.info("pai: the MLflow server did not answer: %s", exc)
                self.tracking.forget()  # (started again elsewhere? ask the cluster)
                if again:
                    break
        raise PaiHTTPError(
            503,
            "the cluster's MLflow server did not answer; try again in a few seconds",
            retry_after=2,
            code="NotAnswering",
        )

    def proxied_activity(self) -> bool:
        return True  # a person using the UI is using this server (its idle culling); no task service to touch

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:  # (no websocket: MLflow's UI has none)
        await self.http_get(**kwargs)


class SandboxedMlflowHandler(MlflowProxyHandler, SandboxedProxyHandler):  # type: ignore[misc]
    """``pai/mlflow/~<cap>/…``: the sandboxed UI's own requests, from its opaque origin, without cookies."""

    route_re = SANDBOXED_MLFLOW_RE

    async def _resolve(self, rest: str | None = None, **_: Any) -> str:  # type: ignore[override]
        return await MlflowProxyHandler._resolve(self, rest)

    @allow_unauthenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("cap", None)
        await SandboxedProxyHandler.http_get(self, **kwargs)


class CompareHandler(LabHandler):
    """``GET pai/api/mlflow/compare?job=user~a&job=user~b…``: ``{"url"}`` of MLflow's compare view of those jobs'
    runs (the Lab opens it in its MLflow tab); 400 when fewer than two of them have a run, saying which have none."""

    @web.authenticated
    async def get(self) -> None:
        jobs = list(dict.fromkeys(self.get_arguments("job")))[:MAX_COMPARED]
        runs: list[tuple[str, str]] = []
        without: list[str] = []
        for job in jobs:
            user, _, name = job.partition("~")
            job = self.registry.job_id(user, name)  # 404 for anyone else's
            status = (await self.call(f"detail of {job}", self.client.detail(job))).job_status
            if status.mlflow_run_id and status.mlflow_experiment_id:
                runs.append((status.mlflow_experiment_id, status.mlflow_run_id))
            else:
                without.append(job)
        if len(runs) < 2:
            why = f"; without a run: {', '.join(without)}" if without else ""
            raise PaiHTTPError(400, f"compare needs two jobs with an MLflow run{why}", code="BadRequest")
        self.send({"url": compare_page(self.base_url, runs), "without": without})


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [
        (pai + "/api/mlflow/compare", CompareHandler, args),
        (pai + "/" + SANDBOXED_MLFLOW_RE, SandboxedMlflowHandler, args),
        (pai + "/" + MLFLOW_RE, MlflowProxyHandler, args),
    ]
