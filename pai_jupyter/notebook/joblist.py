"""JobList: the portal's job list in a notebook — a table that refreshes itself, state filters, row actions.

Columns follow the user guide (6.2): name, submission time, user, duration, virtual cluster, retries, tasks, GPUs,
state. Each row has an action menu: detail, logs, stop, clone, and links to the task's TensorBoard / Jupyter /
terminal routes of the server extension (the widget builds links; it never calls those routes); "config" shows
the submitted config.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as W

from ..common.services import CATALOGUE
from ..common.states import JOB_STATES, TaskState
from .display import LIST_COLUMNS, STATE_COLOURS, base_url, detail_html, error_html, esc, fmt, job_row, link_html
from .display import service_url as route

if TYPE_CHECKING:
    from ..client import Client

STATES = JOB_STATES
ACTIONS = (
    "actions…",
    "detail",
    "config",
    "logs",
    "stop",
    "clone",
    *(s.title for s in CATALOGUE if s.web),  # a link to each web service of the catalogue
    "terminal",
    "SSH",
)
REFRESH = (("off", 0.0), ("10 s", 10.0), ("30 s", 30.0), ("60 s", 60.0))
SERVICE = {**{s.title: s.name for s in CATALOGUE if s.web}, "terminal": "terminal"}


class _Row:
    """The widgets of one job's row, reused across refreshes so a refresh only changes text."""

    def __init__(self, on_action: Callable[[str, str], None]):
        self.job_id = ""
        self.cells = [W.HTML() for _ in LIST_COLUMNS]
        self.action = W.Dropdown(options=ACTIONS, value=ACTIONS[0], layout=W.Layout(width="130px"))
        self.action.observe(lambda ch: self._fire(ch, on_action), names="value")

    def _fire(self, change: Any, on_action: Callable[[str, str], None]) -> None:
        if change["new"] != ACTIONS[0]:
            self.action.value = ACTIONS[0]
            on_action(change["new"], self.job_id)

    def set(self, job: Any) -> None:
        self.job_id = job.id
        for i, (cell, value) in enumerate(zip(self.cells, job_row(job), strict=True)):
            if LIST_COLUMNS[i] == "state":
                html_text = f'<b style="color:{STATE_COLOURS.get(value, "#24292f")}">{esc(value)}</b>'
            else:
                html_text = esc(fmt(value))
            if cell.value != html_text:
                cell.value = html_text

    @property
    def widgets(self) -> list[W.Widget]:
        return [*self.cells, self.action]

    def close(self) -> None:
        for w in self.widgets:
            w.close()


class JobList(W.VBox):
    """Your jobs, newest first. ``source()`` returns the rows (default: ``client.list_jobs`` with the filters)."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        source: Callable[[], Any] | None = None,
        states: list[str] | None = None,
        all_users: bool = False,
        limit: int = 50,
        interval: float = 10.0,
        base: str | None = None,
        **kw: Any,
    ):
        super().__init__(**kw)
        self._client = client
        self.all_users, self.limit, self.base = all_users, limit, base
        self.source = source or self._list
        self.filters = {
            s: W.ToggleButton(description=s, value=s in (states or []), layout=W.Layout(width="auto")) for s in STATES
        }
        self.refresh_button = W.Button(description="Refresh", icon="refresh")
        choices = REFRESH if interval in dict(REFRESH).values() else (*REFRESH, (f"{interval:g} s", interval))
        self.auto = W.Dropdown(
            options=choices, value=interval, description="Auto-refresh", layout=W.Layout(width="200px")
        )
        self.status = W.HTML()
        self.grid = W.GridBox(
            layout=W.Layout(grid_template_columns=f"repeat({len(LIST_COLUMNS)}, auto) 140px", grid_gap="2px 12px")
        )
        self.header = [W.HTML(f"<b>{esc(c)}</b>") for c in (*LIST_COLUMNS, "")]
        self.panel = W.VBox()
        self.rows: dict[str, _Row] = {}
        self.jobs: list[Any] = []
        self.children = [
            W.HBox([*self.filters.values()]),
            W.HBox([self.refresh_button, self.auto, self.status]),
            self.grid,
            self.panel,
        ]
        for b in self.filters.values():
            b.observe(lambda _: self.refresh(), names="value")
        self.refresh_button.on_click(lambda _: self.refresh())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.auto.observe(lambda _: self._restart(), names="value")
        self.refresh()
        self._restart()

    @property
    def client(self) -> Client:
        if self._client is None:
            from ..client import Client

            self._client = Client()
        return self._client

    @property
    def states(self) -> list[str]:
        return [s for s, b in self.filters.items() if b.value]

    def _list(self) -> Any:
        return self.client.list_jobs(state=self.states or None, all_users=self.all_users, limit=self.limit)

    # ---- refreshing ------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Fetch the rows again; rows already shown are updated in place, gone ones closed."""
        try:
            jobs = [j for j in self.source() if not self.states or j.state in self.states]
        except Exception as exc:  # keep the last rows; say why they may be stale
            self.status.value = error_html(f"could not refresh: {exc}")
            return
        keep: dict[str, _Row] = {}
        for job in jobs:
            row = self.rows.pop(job.id, None) or _Row(self.act)
            row.set(job)
            keep[job.id] = row
        for row in self.rows.values():
            row.close()
        self.rows, self.jobs = keep, jobs
        self.grid.children = [*self.header, *(w for r in keep.values() for w in r.widgets)]
        self.status.value = f"{len(jobs)} job{'s' * (len(jobs) != 1)}" + ("" if jobs else " — none yet")

    def _restart(self) -> None:
        self._stop.set()
        self._stop = threading.Event()
        if self.auto.value:
            self._thread = threading.Thread(
                target=self._loop, args=(self._stop, self.auto.value), daemon=True, name="pai-joblist"
            )
            self._thread.start()

    def _loop(self, stop: threading.Event, interval: float) -> None:
        while not stop.wait(interval):
            self.refresh()

    def close(self) -> None:
        self._stop.set()
        for row in self.rows.values():
            row.close()
        super().close()

    # ---- row actions -----------------------------------------------------------------------------------------
    def act(self, action: str, job_id: str) -> None:
        """Run a row action; its result (detail, log viewer, message, links) goes to the panel under the table."""
        from ..client import PaiError

        try:
            if action == "detail":
                self.panel.children = [W.HTML(detail_html(self.client.detail(job_id)))]
            elif action == "config":  # the submitted config, secrets masked
                from .display import config_html

                self.panel.children = [W.HTML(config_html(job_id, self.client.config(job_id)))]
            elif action == "logs":
                from .logviewer import LogViewer

                self.panel.children = [LogViewer(job_id, client=self.client)]
            elif action == "stop":
                self.panel.children = [W.HTML(f"stopping <code>{esc(self.client.stop(job_id))}</code>")]
                self.refresh()
            elif action == "clone":
                self.panel.children = [W.HTML(f"cloned as <code>{esc(self.client.clone(job_id))}</code>")]
                self.refresh()
            elif action == "SSH":  # saves the job's key (0600) where the client runs, shows the commands
                from ..client.ssh import ssh_info, targets_html

                self.panel.children = [W.HTML(targets_html(ssh_info(self.client, job_id)))]
            elif action in SERVICE:
                self.panel.children = [W.HTML(self.links(job_id, SERVICE[action]))]
        except PaiError as exc:
            self.panel.children = [W.HTML(error_html(f"{action} {job_id}: {exc}"))]

    def links(self, job_id: str, service: str) -> str:
        """Links to the server extension's page for each task that runs the service (terminal: each running
        task, a browser terminal page). Uses the client's ``services`` where the server has them, else the job's
        tasks."""
        targets: list[tuple[str, int]] = []
        logdirs: dict[tuple[str, int], str] = {}  # where each TensorBoard looks
        if service != "terminal" and hasattr(self.client, "services"):
            try:
                found = [s for s in self.client.services(job_id) if s.name == service]
            except Exception:
                found = []
            targets = [(s.role, s.index) for s in found]
            logdirs = {(s.role, s.index): s.logdir for s in found if s.logdir}
            if not targets:
                return f"<i>{esc(job_id)} runs no {esc(service)} (add the runtime plugin to the job)</i>"
        if not targets:
            detail = self.client.detail(job_id)
            targets = [(t.role, t.task_index) for t in detail.tasks if t.task_state == TaskState.RUNNING]
            if not targets:
                return f"<i>{esc(job_id)} has no running task ({esc(detail.state)})</i>"
        base = self.base or base_url()
        items = [
            link_html(route(job_id, role, idx, service, base), f"{service} of {role}[{idx}]")
            + (f" (watches <code>{esc(logdirs[role, idx])}</code>)" if (role, idx) in logdirs else "")
            for role, idx in targets
        ]
        return " · ".join(items)
