"""Text or a parsed document to a Job, choosing v1 or v2 by the document itself."""

from __future__ import annotations

from typing import Any

from .errors import JobValidationError, Problem
from .model import Job
from .parse import MAX_DEPTH, TOO_DEEP, load_document, nesting_depth
from .render import MASK


def detect_version(doc: dict[str, Any]) -> str:
    """v2 when it says protocolVersion (or looks like v2: a taskRoles mapping); else v1."""
    if "protocolVersion" in doc:
        return "v2"
    if "jobName" not in doc and isinstance(doc.get("taskRoles"), dict):
        return "v2"
    return "v1"


def job_from_document(doc: dict[str, Any], *, source: str | None = None) -> Job:
    from .v1 import job_from_v1
    from .v2 import job_from_v2

    if not isinstance(doc, dict):
        raise JobValidationError([Problem("", "a job must be a mapping of fields")], source)
    if nesting_depth(doc) > MAX_DEPTH:
        raise JobValidationError([Problem("", TOO_DEEP)], source)
    try:
        return job_from_v2(doc, source=source) if detect_version(doc) == "v2" else job_from_v1(doc, source=source)
    except RecursionError:
        raise JobValidationError([Problem("", TOO_DEEP)], source) from None


def job_from_text(text: str | bytes, *, source: str | None = None) -> Job:
    """Parse and validate; keeps the text verbatim on the job (``job.source_text``) for clone."""
    doc = load_document(text, source=source)
    job = job_from_document(doc, source=source)
    job._source_text = text.decode("utf-8-sig") if isinstance(text, bytes) else text
    return job


def withholds_secrets(doc: dict[str, Any]) -> bool:
    """Is this a config as a cluster serves it, its ``secrets`` block replaced by ``******``?"""
    return isinstance(doc, dict) and doc.get("secrets") == MASK


def job_from_served_config(text: str | bytes, *, source: str | None = None) -> Job:
    """A job's config as the config route serves it (OpenPAI's and ours: ``secrets: "******"``), read as a Job
    for what it says of roles, plugins and resources; the withheld secrets are left out, not invented."""
    doc = load_document(text, source=source)
    if withholds_secrets(doc):
        doc = {k: v for k, v in doc.items() if k != "secrets"}
    return job_from_document(doc, source=source)
