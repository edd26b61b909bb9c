"""ResourceMonitor: live bqplot charts of each task's CPU %, memory and — with NVML — GPU use and GPU memory.

The data source is a parameter (default ``client.metrics``), so the widget runs against the real daemon or a
plain function in tests. Without NVML the sample says ``gpu.available: false``: the widget shows why in a note
and plots CPU and memory only (nvdashboard's lesson: degrade visibly, never fail). History is a fixed window.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bqplot as bq
import ipywidgets as W
import numpy as np

from ..client.models import JobMetrics
from ..common.states import FINAL
from .display import error_html, esc

if TYPE_CHECKING:
    from ..client import Client

MIB = 1024 * 1024
HEADROOM = 1.15  # the y axis goes this far above the highest value
TIME_TICKS = 4  # "%H:%M:%S" labels of a 460 px chart overlap beyond this


class _Chart:
    """One figure: a line per series, over a shared time axis."""

    def __init__(self, title: str, unit: str, ymax: float | None = None):
        self.x = bq.DateScale()
        self.title, self.ymax = title, ymax
        # headroom above the highest value, so no line runs along the top border
        self.y = bq.LinearScale(min=0.0, max=ymax * HEADROOM if ymax else 1.0, allow_padding=False)
        self.lines = bq.Lines(
            x=np.array([], dtype="datetime64[ms]"),
            y=np.array([]),
            scales={"x": self.x, "y": self.y},
            display_legend=True,
        )
        self.figure = bq.Figure(
            marks=[self.lines],
            title=title,
            legend_location="top-left",
            axes=[
                bq.Axis(scale=self.x, label="time", tick_format="%H:%M:%S", num_ticks=TIME_TICKS),
                bq.Axis(scale=self.y, side="left", label=unit, num_ticks=5),
            ],
            layout=W.Layout(width="460px", height="280px"),
            fig_margin={"top": 40, "bottom": 40, "left": 60, "right": 30},
        )  # the last time label
        self.series: dict[str, deque[float]] = {}

    def add(self, values: dict[str, float], window: int, length: int) -> None:
        """Append this sample's value of each series (NaN for a series with no value now)."""
        for key in values.keys() - self.series.keys():
            self.series[key] = deque([math.nan] * (length - 1), maxlen=window)
        for key, q in self.series.items():
            q.append(values.get(key, math.nan))

    def draw(self, times: deque[int]) -> None:
        keys = sorted(self.series)
        if len(times) < 2 or not keys:  # a line needs two points (and bqplot squeezes a 1x1 array to a scalar)
            return
        y = np.array([list(self.series[k]) for k in keys])
        with self.lines.hold_sync():
            self.lines.x = np.array(times, dtype="datetime64[ms]")
            self.lines.y = y
            self.lines.labels = keys
            # one task: its name goes in the title, not in a legend box drawn over the line
            self.lines.display_legend = len(keys) > 1
        self.figure.title = self.title if len(keys) > 1 else f"{self.title} · {keys[0]}"
        if not self.ymax:
            top = float(np.nanmax(y)) if np.isfinite(y).any() else 0.0
            self.y.max = nice_ceiling(top * HEADROOM)

    def last_and_peak(self) -> dict[str, tuple[float, float]]:
        """Per series: its last value and its peak (NaN-free series only)."""
        out = {}
        for key, q in self.series.items():
            values = [v for v in q if not math.isnan(v)]
            if values:
                out[key] = (values[-1], max(values))
        return out


def nice_ceiling(value: float) -> float:
    """The next round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten) at or above ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * power >= value)


def as_metrics(sample: JobMetrics | dict[str, Any]) -> JobMetrics:
    """A source may answer the model or its JSON (a recorded sample, a test's): read both the one way."""
    return sample if isinstance(sample, JobMetrics) else JobMetrics.model_validate(sample)


class ResourceMonitor(W.VBox):
    """``ResourceMonitor(job)``: samples every ``interval`` seconds (settable, pausable) from ``source(job)``."""

    def __init__(
        self,
        job: Any,
        *,
        client: Client | None = None,
        source: Callable[[Any], JobMetrics | dict[str, Any]] | None = None,
        interval: float = 2.0,
        window: int = 300,
        start: bool = True,
        **kw: Any,
    ):
        super().__init__(**kw)
        self.job, self._client, self._source, self.window = job, client, source, window
        self.times: deque[int] = deque(maxlen=window)
        self.cpu = _Chart("CPU", "% of one core")
        self.memory = _Chart("Memory", "MiB")
        self.gpu = _Chart("GPU utilisation", "%", 100.0)
        self.gpu_memory = _Chart("GPU memory", "MiB")
        self.gpu_available: bool | None = None
        self.interval = W.BoundedFloatText(
            value=interval, min=0.2, max=3600.0, step=0.5, description="every (s)", layout=W.Layout(width="170px")
        )
        self.pause = W.ToggleButton(description="Pause", icon="pause", value=False)
        self.note = W.HTML()
        self.status = W.HTML()
        self.summary = W.HTML()  # filled when the job has ended
        self.ended = False
        self.gpu_box = W.HBox([self.gpu.figure, self.gpu_memory.figure], layout=W.Layout(display="none"))
        self.children = [
            W.HBox([self.interval, self.pause, self.status]),
            self.note,
            W.HBox([self.cpu.figure, self.memory.figure]),
            self.gpu_box,
            self.summary,
        ]
        self.pause.observe(
            lambda ch: setattr(self.pause, "description", "Resume" if ch["new"] else "Pause"), names="value"
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    @property
    def source(self) -> Callable[[Any], JobMetrics | dict[str, Any]]:
        if self._source is None:
            if self._client is None:
                from ..client import Client

                self._client = Client()
            self._source = self._client.metrics
        return self._source

    # ---- sampling --------------------------------------------------------------------------------------------
    def poll(self) -> bool:
        """Take one sample and redraw; False when sampling should end (job over, or no metrics here)."""
        try:
            sample = self.source(self.job)
        except Exception as exc:
            if type(exc).__name__ == "NotSupported":
                self.note.value = error_html(f"live metrics are not available from this server: {exc}")
                return False
            self.status.value = error_html(f"sample failed: {exc}")
            return type(exc).__name__ not in ("JobNotFound",)
        sample = as_metrics(sample)
        if sample.tasks and all(t.state in FINAL for t in sample.tasks):
            # the ended tasks have no values: keep the charts as the last samples left them, and say what they were
            self.ended = True
            self.pause.disabled = True
            self.status.value = "<small>the job has ended; sampling stopped</small>"
            self.summary.value = self.summary_html()
            return False
        self.add(sample)
        return True

    def summary_html(self) -> str:
        """Each task's last and peak CPU and memory while the job ran ("resource usage after the job ended")."""
        cpu, mem = self.cpu.last_and_peak(), self.memory.last_and_peak()
        if not cpu and not mem:
            return (
                "<div style='color:#6e7781'>The job had ended before a sample was taken: the cluster measures "
                "running tasks only, so open the monitor while the job runs.</div>"
            )
        rows = []
        for name in sorted(cpu.keys() | mem.keys()):
            c, m = cpu.get(name), mem.get(name)
            rows.append(
                f"<tr><td style='padding:2px 10px 2px 0'>{esc(name)}</td>"
                + "".join(
                    f"<td style='text-align:right;padding:2px 10px'>{v}</td>"
                    for v in (
                        f"{c[0]:.0f} %" if c else "-",
                        f"{c[1]:.0f} %" if c else "-",
                        f"{m[0]:.1f} MiB" if m else "-",
                        f"{m[1]:.1f} MiB" if m else "-",
                    )
                )
                + "</tr>"
            )
        head = "".join(
            f"<th style='text-align:{a};padding:2px 10px'>{h}</th>"
            for a, h in (
                ("left", "task"),
                ("right", "last CPU"),
                ("right", "peak CPU"),
                ("right", "last memory"),
                ("right", "peak memory"),
            )
        )
        return (
            f"<div><b>Resource usage after the job ended</b> ({len(self.times)} samples; the charts keep "
            f"them)</div><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )

    def add(self, sample: JobMetrics | dict[str, Any]) -> None:
        """Add one sample (``client.metrics``' answer, or its JSON) and redraw."""
        sample = as_metrics(sample)
        self.times.append(sample.time)
        n = len(self.times)
        cpu, mem, gpu, gmem = {}, {}, {}, {}
        for t in sample.tasks:
            name = f"{t.role}[{t.index}]"
            if t.cpu_percent is not None:
                cpu[name] = t.cpu_percent
            if t.memory_bytes is not None:
                mem[name] = t.memory_bytes / MIB
            for g in t.gpus:
                gname = f"{name} gpu{g.index}"
                if g.utilization_percent is not None:
                    gpu[gname] = g.utilization_percent
                if g.memory_used_bytes is not None:
                    gmem[gname] = g.memory_used_bytes / MIB
        for chart, values in ((self.cpu, cpu), (self.memory, mem), (self.gpu, gpu), (self.gpu_memory, gmem)):
            chart.add(values, self.window, n)
        self._gpu_note(sample.gpu.available, sample.gpu.message)
        for chart in (self.cpu, self.memory, *((self.gpu, self.gpu_memory) if self.gpu_available else ())):
            chart.draw(self.times)
        self.status.value = f"<small>{len(sample.tasks)} task(s), {n} sample(s)</small>"

    def _gpu_note(self, available: bool, message: str | None) -> None:
        if available == self.gpu_available:
            return
        self.gpu_available = available
        self.gpu_box.layout.display = "" if available else "none"
        self.note.value = (
            ""
            if available
            else (
                f"<div style='color:#8a6d00'>No GPU metrics ({esc(message or 'NVML is not available')}): "
                "showing CPU and memory only.</div>"
            )
        )

    def start(self) -> None:
        self._stop.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(self._stop,), daemon=True, name="pai-monitor")
        self._thread.start()

    def _loop(self, stop: threading.Event) -> None:
        while True:
            if not self.pause.value and not self.poll():
                return
            if stop.wait(self.interval.value):
                return

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()
        super().close()
