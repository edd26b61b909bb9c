"""A sweep's live views: a sortable results table (ipywidgets), the parallel-coordinates plot of parameters and
objective and each trial's metric-vs-step curves (plotly ``FigureWidget``: ``Parcoords``, ``Scatter``).

They redraw whenever the driver saves the sweep's state (``Sweep.listeners``), or on ``refresh()`` for a sweep
driven elsewhere (``Sweep.attach``). Every text shown in the table (parameters, states, job names) is escaped.
"""

from __future__ import annotations

import html
import threading
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

if TYPE_CHECKING:  # only a type here: the driver imports this module when a sweep is displayed
    from .driver import Sweep

STATE_COLOURS = {"SUCCEEDED": "#2ca02c", "FAILED": "#d62728", "STOPPED": "#7f7f7f", "PRUNED": "#ff7f0e"}


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape("" if value is None else str(value))


def rows(sweep: Sweep) -> tuple[list[str], list[list[Any]]]:
    """(columns, rows) of the table: trial, state, objective, each parameter, each other metric, job."""
    trials = sweep.trials
    params = list(sweep.state["space"])
    metrics = sorted({m for t in trials for m in t["metrics"]} - {sweep.state["objective"]})
    columns = ["trial", "state", sweep.state["objective"], *params, *metrics, "job"]
    body = [
        [
            t["number"],
            t["state"],
            t["value"],
            *(t["params"].get(p) for p in params),
            *(t["metrics"].get(m) for m in metrics),
            t["job"],
        ]
        for t in trials
    ]
    return columns, body


def sort_rows(body: list[list[Any]], index: int, descending: bool) -> list[list[Any]]:
    """Sorted by one column; empty cells last either way, numbers before text."""
    present = [r for r in body if r[index] is not None]
    missing = [r for r in body if r[index] is None]
    present.sort(key=lambda r: (isinstance(r[index], str), r[index]), reverse=descending)
    return present + missing


class ResultsTable(widgets.VBox):
    """The trials, sortable by any column (the objective, best first, by default)."""

    def __init__(self, sweep: Sweep) -> None:
        self.sweep = sweep
        self.sort_by = widgets.Dropdown(description="sort by", options=["trial"], value="trial")
        self.descending = widgets.ToggleButton(description="descending", value=False)
        self.summary = widgets.HTML()
        self.grid = widgets.HTML()
        self._started = False
        self._updating = False
        self.sort_by.observe(lambda _: self._changed(), "value")
        self.descending.observe(lambda _: self._changed(), "value")
        super().__init__([self.summary, widgets.HBox([self.sort_by, self.descending]), self.grid])
        self.redraw()

    def _changed(self) -> None:
        if not self._updating:
            self.redraw()

    def redraw(self) -> None:
        columns, body = rows(self.sweep)
        if tuple(self.sort_by.options) != tuple(columns):  # a new metric: new columns, the sort kept
            current = self.sort_by.value
            self._updating = True
            try:
                self.sort_by.options = columns
                self.sort_by.value = current if current in columns and self._started else columns[2]
                if not self._started:
                    self.descending.value = self.sweep.state["mode"] == "max"
            finally:
                self._updating = False
            self._started = True
        body = sort_rows(body, columns.index(self.sort_by.value), self.descending.value)
        best = self.sweep.best()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        lines = []
        for r in body:
            colour = STATE_COLOURS.get(r[1], "inherit")
            weight = "bold" if best is not None and r[0] == best["number"] else "normal"
            cells = "".join(f"<td>{_cell(v)}</td>" for v in r)
            lines.append(f'<tr style="color:{colour};font-weight:{weight}">{cells}</tr>')
        self.grid.value = (
            '<table class="pai-sweep-table" style="border-collapse:collapse"><thead><tr>'
            f"{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"
        )
        counts: dict[str, int] = {}
        for t in self.sweep.trials:
            counts[t["state"]] = counts.get(t["state"], 0) + 1
        states = ", ".join(f"{n} {html.escape(s.lower())}" for s, n in sorted(counts.items()))
        best_text = f" · best {_cell(best['value'])} (trial {best['number']})" if best else ""
        self.summary.value = (
            f"<b>{html.escape(self.sweep.name)}</b>: {html.escape(self.sweep.status)} · "
            f"{len(self.sweep.trials)}/{self.sweep.state['max_trials']} trials ({states}){best_text}"
        )


def parcoords_dimensions(sweep: Sweep) -> list[dict[str, Any]]:
    """Plotly Parcoords dimensions: each parameter (a choice of text as ticks) and the objective, for the trials
    with a value."""
    done = [t for t in sweep.trials if t["value"] is not None]
    dims = []
    for name, spec in sweep.state["space"].items():
        values = [t["params"].get(name) for t in done]
        if spec["type"] == "choice" and not all(isinstance(v, (int, float)) for v in spec["values"]):
            labels = [str(v) for v in spec["values"]]
            dims.append(
                {
                    "label": name,
                    "values": [labels.index(str(v)) for v in values],
                    "tickvals": list(range(len(labels))),
                    "ticktext": labels,
                }
            )
        else:
            dims.append({"label": name, "values": values})
    dims.append({"label": sweep.state["objective"], "values": [t["value"] for t in done]})
    return dims


def parallel_coordinates(sweep: Sweep) -> Any:
    """A FigureWidget with one Parcoords trace, coloured by the objective (``refresh_plot`` updates it)."""
    import plotly.graph_objects as go

    fig = go.FigureWidget(
        go.Parcoords(), layout={"title": f"{sweep.name}: parameters and {sweep.state['objective']}", "height": 360}
    )
    refresh_plot(fig, sweep)
    return fig


def refresh_plot(fig: Any, sweep: Sweep) -> None:
    dims = parcoords_dimensions(sweep)
    scale = "Viridis_r" if sweep.state["mode"] == "min" else "Viridis"
    with fig.batch_update():
        fig.data[0].dimensions = dims
        fig.data[0].line = {"color": dims[-1]["values"], "colorscale": scale, "showscale": True}


def curves(sweep: Sweep, metric: str | None = None) -> Any:
    """A FigureWidget of ``metric`` (default: the objective) against step, one line per trial."""
    import plotly.graph_objects as go

    metric = metric or sweep.state["objective"]
    fig = go.FigureWidget(
        layout={"title": f"{metric} by step", "xaxis_title": "step", "yaxis_title": metric, "height": 360}
    )
    refresh_curves(fig, sweep, metric)
    return fig


def refresh_curves(fig: Any, sweep: Sweep, metric: str) -> None:
    """One trace per trial: the objective's intermediate values (kept in the sweep's state), or the reports."""
    import plotly.graph_objects as go

    traces = []
    for t in sweep.trials:
        if metric == sweep.state["objective"]:
            points = sorted((int(k), v) for k, v in t["intermediate"].items())
        else:
            points = sorted(
                (r.step, r.metrics[metric]) for r in sweep.curves(t) if r.step is not None and metric in r.metrics
            )
        if points:
            traces.append(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[p[1] for p in points],
                    mode="lines+markers",
                    name=f"trial {t['number']}",
                )
            )
    with fig.batch_update():
        fig.data = ()
        for trace in traces:
            fig.add_trace(trace)


class SweepView(widgets.VBox):
    """The table, the parallel-coordinates plot and the curves of one sweep, kept up to date as it runs."""

    def __init__(self, sweep: Sweep, *, plots: bool = True) -> None:
        self.sweep = sweep
        self.table = ResultsTable(sweep)
        self.plot = parallel_coordinates(sweep) if plots else None
        self.curves = curves(sweep) if plots else None
        self.error = widgets.HTML()
        self._lock = threading.Lock()
        children: list[Any] = [self.table, self.error]
        if plots:
            children += [self.plot, self.curves]
        super().__init__(children)
        sweep.listeners.append(lambda _s: self.redraw())

    def redraw(self) -> None:
        with self._lock:
            self.table.redraw()
            if self.plot is not None:
                refresh_plot(self.plot, self.sweep)
            if self.curves is not None:
                refresh_curves(self.curves, self.sweep, self.sweep.state["objective"])
            if self.sweep.error is not None:
                self.error.value = f'<span style="color:#d62728">{html.escape(repr(self.sweep.error))}</span>'

    def refresh(self) -> None:
        """Read the stored state again (a sweep driven elsewhere) and redraw."""
        self.sweep.refresh()
        self.redraw()
