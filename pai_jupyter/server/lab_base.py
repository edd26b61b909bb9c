"""The base of the Lab panel's API handlers (``pai/api/…``): the profile's one client, JSON answers, and the
cluster's errors turned into answers the browser can act on. A module of its own so that each group of routes
(``lab_api``, ``lab_form``, ``lab_ssh``, ``lab_capacity``, ``lab_queue``, ``lab_sweeps``, ``notebookjobs``) derives
from it without importing another."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from jupyter_server.base.handlers import APIHandler

from ..client import AsyncClient, InvalidJob, JobConflict, JobNotFound, NotSupported, PaiError
from ..client.base import LOCAL_DOWN
from .common import PaiHTTPError, SafeErrors, safe_json, unavailable
from .registry import Registry

MAX_FORM_BYTES = 1 << 20  # a job document the form sends
T = TypeVar("T")


class LabHandler(SafeErrors, APIHandler):
    """A Lab API route: authenticated by Jupyter (each method is ``@web.authenticated``), answered as JSON."""

    def initialize(self, registry: Registry) -> None:
        self.registry = registry

    @property
    def client(self) -> AsyncClient:
        return self.registry.client

    def send(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(safe_json(data))

    async def call(self, what: str, coro: Awaitable[T]) -> T:
        """Await a client call; cluster errors become the answers the browser can act on."""
        try:
            return await coro
        except PaiError as exc:
            raise self.failure(what, exc) from None

    def failure(self, what: str, exc: PaiError) -> PaiHTTPError:
        if isinstance(exc, (JobNotFound, NotSupported)) or exc.code == LOCAL_DOWN:
            return unavailable(exc)
        if isinstance(exc, JobConflict):
            return PaiHTTPError(409, exc.message, code="Conflict")
        if isinstance(exc, InvalidJob):
            return PaiHTTPError(400, exc.message, code="InvalidJob")
        self.log.warning("pai: %s: %s", what, exc)
        if exc.status is not None and 400 <= exc.status < 500:
            return PaiHTTPError(exc.status, exc.message, code=exc.code or "BadRequest")
        return PaiHTTPError(502, "the cluster did not answer; see the Jupyter server's log", code="ClusterError")

    def job_body(self) -> dict[str, Any]:
        """The form's request body ``{"text": job YAML or JSON, ...}``: at most 1 MiB, else 413; else a 400 that says
        what to send."""
        if len(self.request.body) > MAX_FORM_BYTES:
            raise PaiHTTPError(413, "a job document is at most 1 MiB", code="TooLarge")
        body = self.get_json_body()
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise PaiHTTPError(400, 'send {"text": "<job YAML or JSON>"}', code="BadRequest")
        return body
