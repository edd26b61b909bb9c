"""Errors the daemon answers with, in OpenPAI's ``{code, message}`` shape."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    status = 400
    code = "BadRequestError"

    def __init__(self, message: str, *, extra: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.extra}


class NoJobError(ApiError):
    status, code = 404, "NoJobError"


class NotFoundError(ApiError):
    status, code = 404, "NotFoundError"


class ConflictJobError(ApiError):
    status, code = 409, "ConflictJobError"


class InvalidProtocolError(ApiError):
    status, code = 400, "InvalidProtocolError"


class InsufficientResourceError(ApiError):
    status, code = 400, "InsufficientResourceError"


class UnauthorizedUserError(ApiError):
    status, code = 401, "UnauthorizedUserError"


class ForbiddenUserError(ApiError):
    status, code = 403, "ForbiddenUserError"


class UnsupportedMediaTypeError(ApiError):
    status, code = 415, "UnsupportedMediaTypeError"


class PayloadTooLargeError(ApiError):
    status, code = 413, "PayloadTooLargeError"


class JobNotFinishedError(ApiError):
    status, code = 409, "JobNotFinishedError"


class BadRequest(ApiError):
    status, code = 400, "InvalidParametersError"
