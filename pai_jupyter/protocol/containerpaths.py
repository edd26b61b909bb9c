"""Container paths the platform's docs (LeinaoPAI's) promise: ``/userhome`` and ``/gdata``.

``/userhome`` is the user's persistent home: Docker tasks get it mounted there. A process-runtime task runs on
the host, where no ``/userhome`` exists, so a ``cd /userhome`` would fail (or, before errexit, go on in a
throwaway directory and end SUCCEEDED). There the commands' ``/userhome`` is rewritten to ``$PAI_USER_HOME``
(the same directory; every task has that variable), quote-aware, and the task's log says so. ``/gdata`` (the
platform's shared datasets) exists on neither runtime: it is only flagged. ``pai validate``, ``pai submit``,
``%%pai_submit`` (local profiles) and the task's log all take their notes from ``notes`` here.
"""

from __future__ import annotations

import re
from typing import Protocol

from .errors import JobValidationError
from .model import Job

HOME, HOME_VAR = "/userhome", "PAI_USER_HOME"
_PATH = re.compile(r"(?<![\w.~/\\-])(/userhome|/gdata)(?=[/\s\"';|&)<>:,=]|$)")
NOTES = {
    "/userhome": (
        "/userhome is your persistent home inside containers (the Docker runtime mounts it); on the "
        "process runtime the commands' /userhome is rewritten to $PAI_USER_HOME, the same directory. "
        "A program that opens /userhome itself should use $PAI_USER_HOME instead"
    ),
    "/gdata": (
        "/gdata (the platform's shared datasets) does not exist on the local cluster: put the data in your "
        "home ($PAI_USER_HOME, /userhome in containers) or give its directory as the job's data "
        "prerequisite (dataDir in v1)"
    ),
}


def found(text: str) -> list[str]:
    """The container paths ``text`` names, each once, in order."""
    return list(dict.fromkeys(m.group(1) for m in _PATH.finditer(text)))


def notes(job: Job) -> list[tuple[str, str]]:
    """(field path, what to do) for every command and prerequisite URI of ``job`` that names a container path."""
    out: list[tuple[str, str]] = []
    for role in job.task_roles:
        for i, command in enumerate(role.commands):
            out += [(f"taskRoles.{role.name}.commands[{i}]", NOTES[p]) for p in found(command)]
    for p in job.prerequisites:
        uris = p.uri if isinstance(p.uri, list) else [p.uri]
        for uri in uris:
            if isinstance(uri, str):
                out += [(f"prerequisites.{p.name}.uri", NOTES[x]) for x in found(uri)]
    return out


def rewrite(script: str) -> tuple[str, bool]:
    """``script`` with each ``/userhome`` path made ``$PAI_USER_HOME`` as the shell's quoting at that point
    needs (outside quotes ``"$PAI_USER_HOME"``, in double quotes ``${PAI_USER_HOME}``, in single quotes
    ``'"$PAI_USER_HOME"'``), and whether anything changed."""
    out: list[str] = []
    quote = ""  # "", "'" or '"'
    i, changed = 0, False
    while i < len(script):
        c = script[i]
        m = _PATH.match(script, i) if c == "/" else None
        if m and m.group(1) == HOME and (i == 0 or not _word_char(script[i - 1])):
            out.append({"": f'"${HOME_VAR}"', '"': f"${{{HOME_VAR}}}", "'": f"'\"${HOME_VAR}\"'"}[quote])
            i, changed = m.end(1), True
            continue
        if c == "\\" and quote != "'" and i + 1 < len(script):
            out.append(script[i : i + 2])
            i += 2
            continue
        if c in "'\"" and quote in ("", c):
            quote = "" if quote == c else c
        out.append(c)
        i += 1
    return "".join(out), changed


def _word_char(c: str) -> bool:
    return c.isalnum() or c in "._~/-"


def rewrite_notice() -> str:
    return (
        f"echo '[pai_jupyter] process runtime: /userhome in the commands means $PAI_USER_HOME "
        f"('\"${HOME_VAR}\"'); programs should read that variable, /userhome exists only in containers'"
    )


class _Profile(Protocol):
    @property
    def is_local(self) -> bool: ...


class ProfiledClient(Protocol):
    """What ``submit_notes`` needs of a client (``pai_jupyter.client.Client``, which this layer does not import)."""

    @property
    def profile(self) -> _Profile: ...


def submit_notes(client: ProfiledClient, text: str | bytes) -> list[tuple[str, str]]:
    """The notes for a job submitted through ``client``: only for the embedded cluster (a real LeinaoPAI has
    these paths)."""
    if not client.profile.is_local:
        return []
    try:
        return notes(Job.from_text(text))
    except JobValidationError:
        return []
