"""The submit form's definition for the Lab (``GET pai/api/form``), Import of a job file as the form's v1 JSON
(``POST pai/api/form/import``, v2 YAML too, as the notebook's JobForm imports), and where each problem of a
validation or a submission is shown: the same definition and field map as JobForm's (``protocol/formspec.py``)."""

from __future__ import annotations

from typing import Any

from tornado import web

from ..client import PaiError
from ..protocol import load as protocol_load
from ..protocol.errors import JobValidationError
from ..protocol.formspec import definition, field_id, refusal_path
from ..protocol.v1 import job_to_form_v1
from .answers import FormImport, PlacedProblem
from .lab_base import LabHandler


def placed(problems: list[dict[str, str]]) -> list[PlacedProblem]:
    """Each problem with ``field``: the Lab form's field it is about ("" for the job as a whole)."""
    out: list[PlacedProblem] = []
    for p in problems:
        path = str(p.get("path") or "") or refusal_path(str(p.get("message") or ""))
        out.append({"path": path, "message": str(p.get("message") or ""), "field": field_id(path) if path else ""})
    return out


class FormHandler(LabHandler):
    """The definition with the virtual clusters the profile's user may submit to; when the cluster cannot say,
    the virtual cluster is a text box with a note saying why (the form still opens)."""

    @web.authenticated
    async def get(self) -> None:
        try:
            vcs, why = await self.client.virtual_clusters(), ""
        except PaiError as exc:
            self.log.warning("pai: the virtual clusters: %s", exc)
            vcs, why = None, exc.message
        self.send(definition(vcs, why))


class ImportHandler(LabHandler):
    """``POST {"text": job YAML or JSON}``: ``{"doc": its v1 JSON}``, or ``{"problems": [...]}`` saying why not."""

    @web.authenticated
    async def post(self) -> None:
        body = self.job_body()
        try:
            doc = job_to_form_v1(protocol_load.job_from_text(body["text"]))
        except JobValidationError as exc:
            refused: FormImport = {"problems": placed([p.to_dict() for p in exc.problems])}
            self.send(refused)
            return
        imported: FormImport = {"doc": doc}
        self.send(imported)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [(pai + "/api/form", FormHandler, args), (pai + "/api/form/import", ImportHandler, args)]
