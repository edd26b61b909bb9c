"""Errors the daemon answers with, in OpenPAI's ``{code, message}`` shape."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    status = 400
    code = "BadRequestError"

    def __init__(self, message: str, *, extra: dict[str, Any] | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.extra = extra or {}
        if status is not None:  # the same code under another status (OpenPAI: NoUserError is 400 at login)
            self.status = status
        self.headers: dict[str, str] = {}  # sent with the error answer

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.extra}


class NoJobError(ApiError):
    status, code = 404, "NoJobError"


class NotFoundError(ApiError):
    """Something under a job (an attempt, a task, a service) is missing: OpenPAI answers NoJobError for those."""

    status, code = 404, "NoJobError"


class NoApiError(ApiError):
    status, code = 404, "NoApiError"


class NoTaskLogError(ApiError):
    status, code = 404, "NoTaskLogError"


class NoTagError(ApiError):
    status, code = 404, "NoTagError"


class NoUserError(ApiError):
    status, code = 404, "NoUserError"


class NoVirtualClusterError(ApiError):
    status, code = 404, "NoVirtualClusterError"


class NoStorageError(ApiError):
    status, code = 404, "NoStorageError"


class NoGroupError(ApiError):
    status, code = 400, "NoGroupError"  # OpenPAI's code answers 400 (its swagger says 404)


class IncorrectPasswordError(ApiError):
    status, code = 400, "IncorrectPasswordError"


class TooManyRequestsError(ApiError):
    """Local extension (OpenPAI's rate limiter answers 429 in plain text): JSON, with Retry-After."""

    status, code = 429, "TooManyRequestsError"

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after
        self.headers["Retry-After"] = str(retry_after)


class ConflictJobError(ApiError):
    status, code = 409, "ConflictJobError"


class InvalidProtocolError(ApiError):
    status, code = 400, "InvalidProtocolError"


class InsufficientResourceError(ApiError):
    """A job that can never fit its virtual cluster: OpenPAI's code for a quota that cannot hold it."""

    status, code = 400, "NoEnoughQuotaError"


class UnauthorizedUserError(ApiError):
    status, code = 401, "UnauthorizedUserError"


class ForbiddenUserError(ApiError):
    status, code = 403, "ForbiddenUserError"


class UnsupportedMediaTypeError(ApiError):
    status, code = 415, "UnsupportedMediaTypeError"


class PayloadTooLargeError(ApiError):
    status, code = 413, "PayloadTooLargeError"


class RangeNotSatisfiable(ApiError):
    status, code = 416, "InvalidParametersError"


class JobNotFinishedError(ApiError):
    status, code = 409, "JobNotFinishedError"


class BadRequest(ApiError):
    status, code = 400, "InvalidParametersError"
