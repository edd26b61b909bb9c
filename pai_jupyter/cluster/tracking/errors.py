"""How MLflow's REST API refuses: its status and ``error_code`` (``RESOURCE_ALREADY_EXISTS``...), as one error."""

from __future__ import annotations

import httpx


class TrackingError(RuntimeError):
    def __init__(self, status: int, code: str, text: str) -> None:
        super().__init__(f"MLflow answered {status} {code}: {text}")
        self.status, self.code = status, code


def error_code(r: httpx.Response) -> str:
    try:
        return str(r.json().get("error_code") or "")
    except ValueError:
        return ""
