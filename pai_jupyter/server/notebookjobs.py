"""Notebooks as jobs in the Lab: submit a notebook of this server's folder as a papermill job, and read its executed
copy while the job runs and after.

``POST pai/api/notebook-jobs`` ``{"path": "dir/train.ipynb", "parameters": {...}}`` -> ``{"id"}`` (the notebook's
folder travels with the job; see ``protocol.notebookjob``). ``GET pai/api/jobs/{user}~{name}/notebook`` -> ``{"id",
"state", "name", "parameters", "notebook"}`` (the nbformat JSON as written so far); ``?format=html`` renders it
read-only (nbconvert) in an opaque origin (``Content-Security-Policy: sandbox``: outputs are the task's, never this
server's; such a page cannot reload itself with this server's cookie, so the Lab tab reloads it). The job's owner
only (anyone else's is a 404, as everywhere). The executed copy sits in the job's ``logs`` output on this machine
(the embedded cluster), written by the task's account: it is opened beneath the job's directory without following
any link on the way (``common/safeio.py``), must be a regular file and is read up to a bound.
"""

from __future__ import annotations

import asyncio
import errno
import html
import json
import os
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import JupyterHandler
from tornado import web

from ..common import safeio
from ..common.origin import gather
from ..protocol import job_from_text
from ..protocol.notebookjob import NOTEBOOK_KEY, notebook_job
from .common import JOB_RE, PaiHTTPError
from .lab_base import LabHandler
from .sandbox import SANDBOX_CSP

MAX_NOTEBOOK_BYTES = 64 << 20
LOGS_IN_JOB_DIR = ("ml", "output", "logs")  # the Estimator layout's (cluster/task/estimator.py)
LINK_ERRORS = (errno.ELOOP, errno.EXDEV, errno.ENOTDIR)  # openat2's answers to a link (RESOLVE_NO_SYMLINKS)


def read_executed(logs: str, output: str, limit: int = MAX_NOTEBOOK_BYTES) -> bytes | None:
    """The executed notebook ``output`` in the job's ``logs`` output dir (``<job dir>/ml/output/logs``), if it is
    a regular file of at most ``limit`` bytes; None if absent. Opened beneath the job's directory (root's: its task
    cannot rename anything there) following no link: ``ml/`` and all below it are the task account's, which could
    make ``ml/output/logs`` a link to any directory this server can read."""
    path = Path(logs)
    if path.parts[-3:] != LOGS_IN_JOB_DIR or len(path.parts) < 5:
        raise PaiHTTPError(404, f"the job's output dir {logs} is not where its layout puts it", code="NotFound")
    name = "/".join((*LOGS_IN_JOB_DIR, os.path.basename(output)))
    try:
        with safeio.open_regular(path.parents[2], name) as (fd, st):
            if st.st_size > limit:
                raise PaiHTTPError(413, f"the executed notebook is over {limit >> 20} MiB", code="TooLarge")
            chunks: list[bytes] = []
            while (left := limit - sum(map(len, chunks))) > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                chunks.append(chunk)
            return b"".join(chunks)
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = "a link on its way, which this server does not follow" if exc.errno in LINK_ERRORS else exc.strerror
        raise PaiHTTPError(404, f"the executed notebook cannot be read ({why})", code="NotFound") from None


class ExecutedNotebookHandler(LabHandler):
    @web.authenticated
    async def get(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        config = await self.call(f"config of {job}", self.client.config(job))
        spec = job_from_text(config).extras.get(NOTEBOOK_KEY)
        if not isinstance(spec, dict) or not isinstance(spec.get("output"), str):
            raise PaiHTTPError(404, f"{job} is not a notebook job", code="NotFound")
        detail = await self.call(f"detail of {job}", self.client.detail(job))
        logs = ((detail.job_status.model_extra or {}).get("outputDirs") or {}).get("logs")
        if not logs:
            raise PaiHTTPError(404, f"{job} has no output on this machine", code="NotFound")
        notebook = None
        for _ in range(20):  # papermill rewrites the file after each cell: a read mid-write is retried
            data = await asyncio.to_thread(read_executed, logs, spec["output"])
            if data is None:
                break
            try:
                notebook = json.loads(data)
                break
            except ValueError:
                await asyncio.sleep(0.05)
        else:
            raise PaiHTTPError(503, "the executed notebook is being written; try again", retry_after=1)
        state = str(detail.state)
        if self.get_argument("format", "json") == "html":
            await self._html(job, state, notebook)
            return
        self.send(
            {
                "id": job,
                "state": state,
                "name": spec["output"],
                "parameters": spec.get("parameters") or {},
                "notebook": notebook,
            }
        )

    async def _html(self, job: str, state: str, notebook: dict[str, Any] | None) -> None:
        if notebook is None:
            said = f"{html.escape(job)} is {html.escape(state)}: no cell has run yet."
            body = f"<html><body><p>{said}</p></body></html>"
        else:
            body = await asyncio.to_thread(_render, notebook)
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Content-Security-Policy", SANDBOX_CSP)
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")
        JupyterHandler.finish(self, body)  # not APIHandler.finish: it would call the page JSON


def _render(notebook: dict[str, Any]) -> str:
    import nbformat  # reads() joins a cell's list of lines, as the exporter needs
    from nbconvert import HTMLExporter

    text, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.reads(json.dumps(notebook), as_version=4))
    return str(text)


class NotebookJobHandler(LabHandler):
    """Submit a notebook under this server's root folder as a papermill job."""

    @web.authenticated
    async def post(self) -> None:
        body = self.get_json_body()
        if not isinstance(body, dict) or not isinstance(body.get("path"), str):
            raise PaiHTTPError(400, 'the body must be {"path": "dir/notebook.ipynb", "parameters": {...}}')
        parameters = body.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise PaiHTTPError(400, "parameters must be a mapping of names to values")
        root = Path(self.settings.get("server_root_dir") or os.getcwd()).expanduser().resolve()
        path = (root / body["path"].lstrip("/")).resolve()
        if root not in path.parents or not path.is_file():
            raise PaiHTTPError(404, "no such notebook under this server's folder", code="NotFound")
        locality = await self.call("the cluster's locality", self.client.locality())
        if not locality.embedded:
            raise PaiHTTPError(501, "notebook jobs need the embedded cluster (the folder travels with the job)")
        try:
            job = notebook_job(path.name, str(path.parent), parameters)
        except ValueError as exc:
            raise PaiHTTPError(400, str(exc), code="BadRequest") from None
        origin = gather("notebook", notebook=body["path"].lstrip("/"), code=path.parent)  # (the user's own folder)
        job_id = await self.call(f"submit of {path.name}", self.client.submit(job, origin=origin))
        self.send({"id": job_id}, status=202)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [
        (pai + "/api/notebook-jobs", NotebookJobHandler, args),
        (pai + "/api/jobs/" + JOB_RE + "/notebook", ExecutedNotebookHandler, args),
    ]
