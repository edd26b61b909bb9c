"""Small edits to a submitted document that keep the rest of its text as written (for clone, --param and --notify)."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from .parse import load_document
from .rules import NOTIFY_KEY, NOTIFY_STATES
from .wire import detect_version


def _dump(doc: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def rename_text(text: str, new_name: str) -> str:
    """The same document with a new job name. Only the name's own text changes when it can be found alone;
    otherwise the document is written anew (comments are then lost, the content is not)."""
    doc = load_document(text)
    key = "name" if detect_version(doc) == "v2" else "jobName"
    old = doc.get(key)
    as_json = text.lstrip().startswith("{")
    if isinstance(old, str):
        if as_json:
            pattern = re.compile(r'("' + key + r'"\s*:\s*)' + re.escape(json.dumps(old)))
            candidate = pattern.sub(lambda m: m.group(1) + json.dumps(new_name), text, count=1)
        else:
            pattern = re.compile(
                r"^(" + key + r"\s*:[ \t]*)(['\"]?)" + re.escape(old) + r"\2([ \t]*(#.*)?)$", re.MULTILINE
            )
            candidate = pattern.sub(lambda m: m.group(1) + new_name + m.group(3), text, count=1)
        try:
            if load_document(candidate) == {**doc, key: new_name}:
                return candidate
        except ValueError:
            pass
    return _dump({**doc, key: new_name}, as_json)


def with_parameters(text: str, params: dict[str, Any]) -> str:
    """Set parameters (v2) / jobEnvs (v1); the document is written anew."""
    doc = load_document(text)
    key = "parameters" if detect_version(doc) == "v2" else "jobEnvs"
    merged = {**(doc.get(key) or {}), **params}
    return _dump({**doc, key: merged}, text.lstrip().startswith("{"))


def with_notification(text: str, changes: list[str]) -> str:
    """Ask for OpenPAI's job status change notification of ``changes`` (running, succeeded, failed, stopped,
    retried) in ``extras.jobStatusChangeNotification``, keeping what the document already asks for (a webhook too);
    the document is written anew. ValueError names a change that is not one of those."""
    known = list(NOTIFY_STATES.values())
    unknown = [c for c in changes if c not in known]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: a notification is one of {', '.join(known)}")
    doc = load_document(text)
    extras = dict(doc.get("extras") or {})
    current = extras.get(NOTIFY_KEY)
    extras[NOTIFY_KEY] = {**(current if isinstance(current, dict) else {}), **dict.fromkeys(changes, True)}
    return _dump({**doc, "extras": extras}, text.lstrip().startswith("{"))
