"""Text or a parsed document to a Job, choosing v1 or v2 by the document itself (``Job.from_text`` and
``Job.from_dict`` by their public function names), and a job's config as a cluster serves it."""

from __future__ import annotations

from typing import Any

from .model import Job
from .parse import load_document
from .render import MASK
from .wire import detect_version

__all__ = ["detect_version", "job_from_document", "job_from_served_config", "job_from_text", "withholds_secrets"]


def job_from_document(doc: dict[str, Any], *, source: str | None = None) -> Job:
    return Job.from_dict(doc, source=source)


def job_from_text(text: str | bytes, *, source: str | None = None) -> Job:
    """Parse and validate; keeps the text verbatim on the job (``job.source_text``) for clone."""
    return Job.from_text(text, source=source)


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
