"""Exceptions a user can act on. Each says what happened and, where there is one, what to do next."""

from __future__ import annotations

from typing import Any


class PaiError(Exception):
    """Base of every client error."""

    exit_code = 3

    def __init__(
        self, message: str, *, status: int | None = None, code: str | None = None, body: dict[str, Any] | None = None
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.body = body or {}


class JobNotFound(PaiError):
    exit_code = 2


class JobConflict(PaiError):
    """A job with this name exists already (names are unique per user)."""

    exit_code = 2


class InvalidJob(PaiError):
    """The server refused the job document; ``problems`` lists ``{path, message}`` for each field."""

    exit_code = 2

    @property
    def problems(self) -> list[dict[str, str]]:
        return list(self.body.get("problems") or [])


class BadRequest(PaiError):
    exit_code = 2


class Unauthorized(PaiError):
    """No token, a wrong or expired one, or not allowed to do this."""


class ServerUnavailable(PaiError):
    """Nothing answered at the profile's url (or it answered with a 5xx)."""


class RateLimited(PaiError):
    """HTTP 429. ``retry_after`` is the server's Retry-After in seconds (None when it gave none)."""

    def __init__(self, message: str, retry_after: float | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class NotSupported(PaiError):
    """The server does not offer this (e.g. task services, metrics or terminals on a remote OpenPAI)."""

    exit_code = 2


class WaitTimeout(PaiError, TimeoutError):
    exit_code = 1
