"""Training curves (loss, accuracy, …) from TensorBoard event files, a running TensorBoard, or log lines.

Three sources, one frame shape (``series, step, value``) and one plot:
- ``from_logdir(path)``: event files read with TensorBoard's own ``EventAccumulator`` (scalars, and TF2's
  scalar tensors);
- ``from_job(client, job)``: the job's TensorBoard service asked over its HTTP API (the one client tells
  where it runs), so nothing reads the cluster's files behind its back;
- ``from_log(text, definitions)``: Alibaba PAI's metric definitions, ``[{"Name": "loss", "Regex": "loss=(\\S+)"}]``
  — the first group (or the group named ``value``) is the value; a group named ``step`` gives the step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..client import Client

COLUMNS = ["series", "step", "value", "wall_time"]
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def _frame(rows: list[tuple[str, int, float, float | None]]) -> Any:
    import pandas as pd

    return pd.DataFrame(rows, columns=COLUMNS)


def from_logdir(logdir: str | Path, tags: Iterable[str] | None = None) -> Any:
    """Every scalar under ``logdir`` (each directory holding event files is a run: ``series`` = ``run/tag``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    root = Path(logdir)
    wanted = set(tags) if tags is not None else None
    rows: list[tuple[str, int, float, float | None]] = []
    runs = sorted({p.parent for p in root.rglob("*tfevents*")})
    for run in runs:
        name = str(run.relative_to(root)) if run != root else "."
        acc = EventAccumulator(str(run), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        found = acc.Tags()
        for tag in found.get("scalars", []):
            if wanted is None or tag in wanted:
                rows += [(f"{name}/{tag}", e.step, float(e.value), e.wall_time) for e in acc.Scalars(tag)]
        for tag in found.get("tensors", []):
            if (wanted is not None and tag not in wanted) or acc.SummaryMetadata(
                tag
            ).plugin_data.plugin_name != "scalars":
                continue
            for e in acc.Tensors(tag):
                value = tensor_util.make_ndarray(e.tensor_proto)
                if value.size == 1:
                    rows.append((f"{name}/{tag}", e.step, float(value.reshape(())), e.wall_time))
    return _frame(rows)


def from_tensorboard(url: str, tags: Iterable[str] | None = None, timeout: float = 10.0) -> Any:
    """Scalars from a running TensorBoard's HTTP API (``/data/plugin/scalars/tags`` and ``/scalars``)."""
    import httpx

    wanted = set(tags) if tags is not None else None
    base = url if url.endswith("/") else url + "/"
    rows: list[tuple[str, int, float, float | None]] = []
    with httpx.Client(timeout=timeout) as http:
        index = http.get(base + "data/plugin/scalars/tags")
        index.raise_for_status()
        for run, run_tags in sorted(index.json().items()):
            for tag in sorted(run_tags):
                if wanted is not None and tag not in wanted:
                    continue
                r = http.get(base + "data/plugin/scalars/scalars", params={"run": run, "tag": tag})
                r.raise_for_status()
                rows += [(f"{run}/{tag}", int(step), float(value), float(wall)) for wall, step, value in r.json()]
    return _frame(rows)


def from_job(client: Client, job: Any, tags: Iterable[str] | None = None) -> Any:
    """Scalars from a running job's TensorBoard service (needs the server's ``services``; the job must run)."""
    services = [s for s in client.services(job) if s.name == "tensorboard"]
    if not services:
        raise ValueError(f"{client.job_id(job)} runs no TensorBoard (add the tensorboard runtime plugin)")
    s = services[0]
    return from_tensorboard(f"http://{s.host}:{s.port}{s.base_path or '/'}", tags)


def _definitions(definitions: Mapping[str, str] | Iterable[Mapping[str, str]]) -> list[tuple[str, re.Pattern[str]]]:
    if isinstance(definitions, Mapping):
        items = list(definitions.items())
    else:
        items = [(d.get("Name") or d.get("name"), d.get("Regex") or d.get("regex")) for d in definitions]
    out = []
    for name, regex in items:
        if not name or not regex:
            raise ValueError("each metric definition needs a Name and a Regex")
        pattern = re.compile(regex)
        if pattern.groups < 1:
            raise ValueError(f"metric {name!r}: the regex needs a group around the value: {regex!r}")
        out.append((str(name), pattern))
    return out


def from_log(text: str | Iterable[str], definitions: Mapping[str, str] | Iterable[Mapping[str, str]]) -> Any:
    """Metrics scraped from log lines; without a ``step`` group the step counts the metric's matches."""
    defs = _definitions(definitions)
    lines = text.splitlines() if isinstance(text, str) else list(text)
    counts = dict.fromkeys((n for n, _ in defs), 0)
    rows: list[tuple[str, int, float, float | None]] = []
    for line in lines:
        for name, pattern in defs:
            for m in pattern.finditer(line):
                raw = m.group("value") if "value" in pattern.groupindex else m.group(1)
                try:
                    value = float(raw)
                except (TypeError, ValueError):
                    continue
                step = int(m.group("step")) if "step" in pattern.groupindex and m.group("step") else counts[name]
                counts[name] += 1
                rows.append((name, step, value, None))
    return _frame(rows)


def from_job_log(
    client: Client, job: Any, definitions: Any, *, role: str | None = None, index: int = 0, stream: str = "all"
) -> Any:
    return from_log(client.logs(job, role=role, index=index, stream=stream), definitions)


def plot(frame: Any, title: str = "training curves", series: Iterable[str] | None = None) -> Any:
    """A bqplot figure with a line per series (step on x); ``series`` picks some."""
    import bqplot as bq
    import ipywidgets as W

    x, y = bq.LinearScale(), bq.LinearScale()
    names = list(series) if series is not None else sorted(frame["series"].unique())
    marks = []
    for i, name in enumerate(names):
        part = frame[frame["series"] == name].sort_values("step")
        marks.append(
            bq.Lines(
                x=part["step"].to_numpy(),
                y=part["value"].to_numpy(),
                scales={"x": x, "y": y},
                labels=[name],
                colors=[PALETTE[i % len(PALETTE)]],
                display_legend=True,
            )
        )
    return bq.Figure(
        marks=marks,
        title=title,
        legend_location="top-right",
        axes=[bq.Axis(scale=x, label="step"), bq.Axis(scale=y, side="left", label="value")],
        layout=W.Layout(width="640px", height="360px"),
    )
