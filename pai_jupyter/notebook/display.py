"""HTML for the notebook surfaces, and the one-line status a waiting cell rewrites in place.

Every job name, user, command, log line, path and message that reaches HTML goes through ``esc`` here: the
jobs and their logs are written by users and programs, and a notebook renders HTML with the user's rights.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ..common.format import duration, fmt
from ..common.routes import service_route
from ..common.states import JobState, TaskState

if TYPE_CHECKING:
    from ..client import Client

STATE_COLOURS = {
    "WAITING": "#8a6d00",
    "RUNNING": "#0b62a4",
    "STOPPING": "#8a6d00",
    "SUCCEEDED": "#1a7f37",
    "FAILED": "#cf222e",
    "STOPPED": "#6e7781",
}


def esc(value: Any) -> str:
    """Text made safe for HTML content and attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def base_url() -> str:
    """The Jupyter server's base_url as the kernel can know it: $PAI_JUPYTER_BASE_URL, JupyterHub's prefix, or /."""
    url = os.environ.get("PAI_JUPYTER_BASE_URL") or os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or "/"
    return url if url.endswith("/") else url + "/"


def service_url(job_id: str, role: str, index: int, service: str, base: str | None = None) -> str:
    """The server extension's route to a task's service: ``{base}pai/jobs/{user}~{name}/{role}/{index}/{service}/``."""
    user, _, name = job_id.partition("~")
    return service_route(base or base_url(), user, name, role, index, service)


def state_html(state: str | None) -> str:
    colour = STATE_COLOURS.get(state or "", "#24292f")
    return f'<b style="color:{colour}">{esc(state)}</b>'


def table_html(columns: Sequence[str], rows: Iterable[Sequence[Any]], state_col: int | None = None) -> str:
    head = "".join(f"<th style='text-align:left'>{esc(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = [state_html(v) if i == state_col else esc(fmt(v)) for i, v in enumerate(row)]
        body.append("<tr>" + "".join(f"<td style='text-align:left'>{c}</td>" for c in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# ---- status of one job -----------------------------------------------------------------------------------------
def status_text(detail: Any, elapsed: float | None = None) -> str:
    """``alice~x: WAITING (no free GPU) · 3 s`` — the line a waiting cell keeps rewriting."""
    s = detail.job_status
    why = f" ({s.waiting_reason})" if s.state == JobState.WAITING and s.waiting_reason else ""
    done = ""
    if detail.is_final:
        done = f", exit code {s.app_exit_code}" if s.app_exit_code is not None else ""
    took = f" · {duration(elapsed)}" if elapsed is not None else ""
    return f"{detail.id}: {s.state}{why}{done}{took}"


def status_html(detail: Any, elapsed: float | None = None) -> str:
    s = detail.job_status
    why = f" <i>({esc(s.waiting_reason)})</i>" if s.state == JobState.WAITING and s.waiting_reason else ""
    done = ""
    if detail.is_final and s.app_exit_code is not None:
        done = f", exit code <b>{esc(s.app_exit_code)}</b>"
    took = f" · {esc(duration(elapsed))}" if elapsed is not None else ""
    diag = ""
    if detail.is_final and s.state != JobState.SUCCEEDED and s.app_exit_diagnostics:
        diag = f"<br><span style='color:#6e7781'>{esc(s.app_exit_diagnostics[:500])}</span>"
    return f"<span><code>{esc(detail.id)}</code>: {state_html(s.state)}{why}{done}{took}{diag}</span>"


def stopped_note(job_state: str | None, task_state: str | None, job_diagnostics: str | None = None) -> str:
    """Why a task of an ended job says STOPPED (exit 143) when nobody stopped it: the job's completion policy
    (minSucceeded / minFailed) ended the job and the daemon stopped the tasks still running. "" otherwise."""
    if task_state != TaskState.STOPPED or job_state not in (JobState.SUCCEEDED, JobState.FAILED):
        return ""
    why = f": {job_diagnostics}" if job_diagnostics else ""
    return f"stopped because the job had ended {job_state}{why}"


def task_diagnostics(detail: Any, task: Any) -> str:
    """A task's diagnostics, or why it was stopped when its job ended without it."""
    s = detail.job_status
    return task.container_exit_diagnostics or stopped_note(s.state, task.task_state, s.app_exit_diagnostics)


def detail_html(detail: Any) -> str:
    """A job's state, why it waits or how it ended, and a row per task."""
    s = detail.job_status
    lines = [f"<p>{status_html(detail)}</p>"]
    facts = [
        ("submitted", fmt(s.submission_time)),
        ("duration", duration(s.duration_s)),
        ("virtual cluster", s.virtual_cluster),
        ("retries", s.retries),
    ]
    lines.append("<p>" + " · ".join(f"{esc(k)} {esc(v)}" for k, v in facts if v not in (None, "")) + "</p>")
    rows = [
        [
            t.role,
            t.task_index,
            t.task_state,
            t.container_ip,
            t.ports,
            t.container_exit_code,
            task_diagnostics(detail, t)[:200],
        ]
        for t in detail.tasks
    ]
    lines.append(table_html(["role", "index", "state", "IP", "ports", "exit code", "diagnostics"], rows, 2))
    return "".join(lines)


def config_html(job_id: str, text: str) -> str:
    """A job's submitted config (secrets masked by the server), with a link that saves it (the user guide's "JSON
    file" view of a job)."""
    json_like = text.lstrip().startswith("{")
    name = job_id.partition("~")[2] or job_id
    filename, mime = (f"{name}.json", "application/json") if json_like else (f"{name}.yaml", "text/yaml")
    return (
        f"<div>submitted config of <code>{esc(job_id)}</code> · "
        f"{download_html(filename, text, mime, f'download {filename}')}</div>{pre_html(text)}"
    )


def detail_text(detail: Any) -> str:
    s = detail.job_status
    out = [status_text(detail)]
    if s.app_exit_diagnostics and s.state != JobState.SUCCEEDED:
        out.append(f"  {s.app_exit_diagnostics}")
    out += [
        f"  {t.role}[{t.task_index}] {t.task_state}"
        + (f" exit {t.container_exit_code}" if t.container_exit_code is not None else "")
        + (f" ({why})" if (why := task_diagnostics(detail, t)) else "")
        for t in detail.tasks
    ]
    return "\n".join(out)


def problems_list(problems: Iterable[Any]) -> list[tuple[str, str]]:
    """(path, message) pairs from protocol Problems or the client's ``{path, message}`` dicts."""
    out = []
    for p in problems:
        if isinstance(p, dict):
            out.append((str(p.get("path") or ""), str(p.get("message") or "")))
        else:
            out.append((str(getattr(p, "path", "") or ""), str(getattr(p, "message", p))))
    return out


def problems_text(problems: Iterable[Any], title: str = "invalid job") -> str:
    items = problems_list(problems)
    lines = [f"{title} ({len(items)} problem{'s' * (len(items) != 1)})"]
    lines += [f"  - {path}: {msg}" if path else f"  - {msg}" for path, msg in items]
    return "\n".join(lines)


def problems_html(problems: Iterable[Any], title: str = "invalid job") -> str:
    items = problems_list(problems)
    rows = "".join(f"<li>{f'<code>{esc(path)}</code>: ' if path else ''}{esc(msg)}</li>" for path, msg in items)
    return (
        f"<div style='color:#cf222e'><b>{esc(title)}</b> ({len(items)} problem{'s' * (len(items) != 1)})"
        f"<ul>{rows}</ul></div>"
    )


def error_html(message: str) -> str:
    return f"<div style='color:#cf222e'>{esc(message)}</div>"


def pre_html(text: str) -> str:
    return f"<pre style='white-space:pre-wrap;margin:0'>{esc(text)}</pre>"


def link_html(url: str, text: str) -> str:
    return f'<a href="{esc(url)}" target="_blank" rel="noopener">{esc(text)}</a>'


def download_html(filename: str, data: str, mime: str, label: str) -> str:
    """A link that makes the browser save ``data`` as ``filename`` (a data: URI; nothing is served)."""
    payload = base64.b64encode(data.encode("utf-8", "replace")).decode()
    return f'<a download="{esc(filename)}" href="data:{mime};charset=utf-8;base64,{payload}">{esc(label)}</a>'


def bundle(text: str, html_text: str) -> dict[str, str]:
    return {"text/plain": text, "text/html": html_text}


def show(text: str, html_text: str | None = None) -> None:
    """Display plain text and, for frontends that render it, its HTML twin."""
    from IPython.display import display

    display(bundle(text, html_text if html_text is not None else pre_html(text)), raw=True)


class StatusLine:
    """One output that is rewritten in place (``display_id``), never a growing list of lines.

    Only changes are sent: the elapsed time is shown in whole seconds, so a poll 10 times a second costs at
    most one update a second.
    """

    def __init__(self) -> None:
        self.handle: Any = None
        self.last: str | None = None

    def update(self, text: str, html_text: str) -> None:
        if text == self.last:
            return
        self.last = text
        from IPython.display import display

        if self.handle is None:
            self.handle = display(bundle(text, html_text), raw=True, display_id=True)
        else:
            self.handle.update(bundle(text, html_text), raw=True)

    def job(self, detail: Any, elapsed: float | None = None) -> None:
        self.update(status_text(detail, elapsed), status_html(detail, elapsed))


def submitted_text(job_id: str) -> str:
    return f"submitted {job_id}  (%pai_status {job_id} · %pai_logs {job_id} -f · %pai_stop {job_id})"


def submitted_html(job_id: str, client: Client) -> str:
    """The job id and where to look next: the portal's job page on a remote OpenPAI, else the magics."""
    hints = " · ".join(
        f"<code>%pai_{m} {esc(job_id)}{extra}</code>" for m, extra in (("status", ""), ("logs", " -f"), ("stop", ""))
    )
    profile = getattr(client, "profile", None)
    portal = ""
    if profile is not None and not profile.is_local and profile.url:
        user, _, name = job_id.partition("~")
        url = f"{profile.url.rstrip('/')}/job-detail.html?{urlencode({'username': user, 'jobName': name})}"
        portal = " · " + link_html(url, "open in the portal")
    return f"<span>submitted <code>{esc(job_id)}</code>{portal} — {hints}</span>"


# ---- the job list ------------------------------------------------------------------------------------------------
LIST_COLUMNS = (
    "name",
    "submitted",
    "user",
    "duration",
    "virtual cluster",
    "retries",
    "tasks",
    "GPUs",
    "state",
    "exit code",
)


def job_row(job: Any) -> list[Any]:
    """One job list row: the user guide's columns (name, submission time, user, duration, VC, retries, tasks, GPUs,
    state), plus the exit code."""
    return [
        job.name,
        job.submission_time,
        job.username,
        duration(job.duration_s),
        job.virtual_cluster,
        job.retries,
        job.total_task_number,
        job.total_gpu_number,
        job.state,
        job.app_exit_code,
    ]


def jobs_frame(jobs: Iterable[Any]) -> Any:
    """A DataFrame of the list (its HTML escapes every cell); the job ids are the index."""
    import pandas as pd

    jobs = list(jobs)
    frame = pd.DataFrame(
        [job_row(j) for j in jobs], columns=list(LIST_COLUMNS), index=pd.Index([j.id for j in jobs], name="job")
    )
    frame["submitted"] = [fmt(j.submission_time) for j in jobs]
    return frame
