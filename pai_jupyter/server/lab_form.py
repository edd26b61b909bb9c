"""The submit form's definition for the Lab (``GET pai/api/form``) and where each problem of a validation or a
submission is shown: the same definition and field map as the notebook's JobForm (``protocol/formspec.py``)."""

from __future__ import annotations

from typing import Any

from tornado import web

from ..protocol.formspec import definition, field_id, refusal_path
from .lab_api import _Base


def placed(problems: list[dict[str, str]]) -> list[dict[str, str]]:
    """Each problem with ``field``: the Lab form's field it is about ("" for the job as a whole)."""
    out = []
    for p in problems:
        path = str(p.get("path") or "") or refusal_path(str(p.get("message") or ""))
        out.append({"path": path, "message": str(p.get("message") or ""), "field": field_id(path) if path else ""})
    return out


class FormHandler(_Base):
    @web.authenticated
    async def get(self) -> None:
        self.send(definition())


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [(pai + "/api/form", FormHandler, args)]
