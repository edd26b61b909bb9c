"""What a call yields and how an answer is read: requests and sleeps (``Op``), error responses mapped to the
exceptions a user can act on, and JSON bodies checked for the shape the call expects."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeVar

import httpx

from .errors import (
    BadRequest,
    InvalidJob,
    JobConflict,
    JobNotFound,
    PaiError,
    RateLimited,
    ServerUnavailable,
    Unauthorized,
)

T = TypeVar("T")


@dataclass
class Req:
    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = True
    auth: bool = True
    location: bool = False  # a URI the server handed out: resolved against its origin (see base.request_url)


@dataclass
class Sleep:
    seconds: float


Op = Generator[Req | Sleep, httpx.Response, T]
"""A call: yields a Req (and is sent its response) or a Sleep (and is resumed with ``next``); returns a T."""


class _ErrorFields(TypedDict):
    status: int
    code: str | None
    body: dict[str, Any]


def error_for(resp: httpx.Response, where: str) -> PaiError:
    """Map an error response ({code, message}) to the exception a user can act on."""
    try:
        parsed = resp.json()
    except ValueError:
        parsed = None
    body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    code = body.get("code")
    code = code if isinstance(code, str) else None
    message = str(body.get("message") or resp.text[:300] or resp.reason_phrase)
    status = resp.status_code
    kw: _ErrorFields = {"status": status, "code": code, "body": body}
    if status in (401, 403):
        return Unauthorized(f"{message} ({where}); log in again with: pai profile login", **kw)
    if status == 400 and (
        code in ("IncorrectPasswordError", "NoUserError") or "/authn/basic/login" in str(resp.request.url)
    ):  # OpenPAI answers a failed login 400
        return Unauthorized(f"login refused by {where}: {message}", **kw)
    if status == 404:
        return JobNotFound(message, **kw)
    if status == 409 and code == "ConflictJobError":
        return JobConflict(message, **kw)
    if status == 400 and code in ("InvalidProtocolError", "NoEnoughQuotaError", "InsufficientResourceError"):
        return InvalidJob(message, **kw)
    if status == 429:
        after = resp.headers.get("Retry-After")
        try:
            seconds = float(after) if after is not None else None
        except ValueError:
            seconds = None
        return RateLimited(
            f"rate limited by {where}" + (f"; retry after {seconds:g} s" if seconds else ""), retry_after=seconds, **kw
        )
    if status >= 500:
        return ServerUnavailable(f"{where} answered {status}: {message}", **kw)
    return BadRequest(message, **kw)


def json_object(resp: httpx.Response) -> dict[str, Any]:
    """The response's JSON object; a server that answers anything else gets a PaiError that names the call."""
    body = resp.json()
    if not isinstance(body, dict):
        raise PaiError(f"{_call(resp)} answered a JSON {type(body).__name__} where an object was expected")
    return body


def json_list(resp: httpx.Response) -> list[dict[str, Any]]:
    """The response's JSON array of objects (rows); anything else is a PaiError that names the call."""
    body = resp.json()
    if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
        raise PaiError(f"{_call(resp)} answered a JSON {type(body).__name__} where a list of objects was expected")
    return body


def _call(resp: httpx.Response) -> str:
    return f"{resp.request.method} {resp.request.url.path}"
