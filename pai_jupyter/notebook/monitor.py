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
from typing import Any

import bqplot as bq
import ipywidgets as W
import numpy as np

from .display import error_html, esc

FINAL = ("SUCCEEDED", "FAILED", "STOPPED")
MIB = 1024 * 1024


class _Chart:
    """One figure: a line per series, over a shared time axis."""

    def __init__(self, title: str, unit: str, ymax: float | None = None):
        self.x = bq.DateScale()
        self.y = bq.LinearScale(min=0.0, max=ymax) if ymax else bq.LinearScale(min=0.0)
        self.lines = bq.Lines(x=np.array([], dtype="datetime64[ms]"), y=np.array([]),
                              scales={"x": self.x, "y": self.y}, display_legend=True)
        self.figure = bq.Figure(marks=[self.lines], title=title, legend_location="top-left",
                                axes=[bq.Axis(scale=self.x, label="time", tick_format="%H:%M:%S"),
                                      bq.Axis(scale=self.y, side="left", label=unit)],
                                layout=W.Layout(width="460px", height="280px"),
                                fig_margin={"top": 40, "bottom": 40, "left": 60, "right": 10})
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
        with self.lines.hold_sync():
            self.lines.x = np.array(times, dtype="datetime64[ms]")
            self.lines.y = np.array([list(self.series[k]) for k in keys])
            self.lines.labels = keys


class ResourceMonitor(W.VBox):
    """``ResourceMonitor(job)``: samples every ``interval`` seconds (settable, pausable) from ``source(job)``."""

    def __init__(self, job: Any, *, client: Any = None, source: Callable[[Any], dict[str, Any]] | None = None,
                 interval: float = 2.0, window: int = 300, start: bool = True, **kw: Any):
        super().__init__(**kw)
        self.job, self._client, self._source, self.window = job, client, source, window
        self.times: deque[int] = deque(maxlen=window)
        self.cpu = _Chart("CPU", "% of one core")
        self.memory = _Chart("Memory", "MiB")
        self.gpu = _Chart("GPU utilisation", "%", 100.0)
        self.gpu_memory = _Chart("GPU memory", "MiB")
        self.gpu_available: bool | None = None
        self.interval = W.BoundedFloatText(value=interval, min=0.2, max=3600.0, step=0.5, description="every (s)",
                                           layout=W.Layout(width="170px"))
        self.pause = W.ToggleButton(description="Pause", icon="pause", value=False)
        self.note = W.HTML()
        self.status = W.HTML()
        self.gpu_box = W.HBox([self.gpu.figure, self.gpu_memory.figure], layout=W.Layout(display="none"))
        self.children = [W.HBox([self.interval, self.pause, self.status]), self.note,
                         W.HBox([self.cpu.figure, self.memory.figure]), self.gpu_box]
        self.pause.observe(lambda ch: setattr(self.pause, "description", "Resume" if ch["new"] else "Pause"),
                           names="value")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    @property
    def source(self) -> Callable[[Any], dict[str, Any]]:
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
        self.add(sample)
        tasks = sample.get("tasks") or []
        if tasks and all(t.get("state") in FINAL for t in tasks):
            self.status.value = "<small>the job has ended; sampling stopped</small>"
            return False
        return True

    def add(self, sample: dict[str, Any]) -> None:
        """Add one sample in the ``client.metrics`` shape and redraw."""
        self.times.append(int(sample.get("time") or 0))
        n = len(self.times)
        cpu, mem, gpu, gmem = {}, {}, {}, {}
        for t in sample.get("tasks") or []:
            name = f"{t.get('role')}[{t.get('index')}]"
            if t.get("cpuPercent") is not None:
                cpu[name] = float(t["cpuPercent"])
            if t.get("memoryBytes") is not None:
                mem[name] = t["memoryBytes"] / MIB
            for g in t.get("gpus") or []:
                gname = f"{name} gpu{g.get('index')}"
                if g.get("utilizationPercent") is not None:
                    gpu[gname] = float(g["utilizationPercent"])
                if g.get("memoryUsedBytes") is not None:
                    gmem[gname] = g["memoryUsedBytes"] / MIB
        for chart, values in ((self.cpu, cpu), (self.memory, mem), (self.gpu, gpu), (self.gpu_memory, gmem)):
            chart.add(values, self.window, n)
        info = sample.get("gpu") or {}
        self._gpu_note(bool(info.get("available")), info.get("message"))
        for chart in (self.cpu, self.memory, *((self.gpu, self.gpu_memory) if self.gpu_available else ())):
            chart.draw(self.times)
        self.status.value = f"<small>{len(sample.get('tasks') or [])} task(s), {n} sample(s)</small>"

    def _gpu_note(self, available: bool, message: str | None) -> None:
        if available == self.gpu_available:
            return
        self.gpu_available = available
        self.gpu_box.layout.display = "" if available else "none"
        self.note.value = "" if available else (
            f"<div style='color:#8a6d00'>No GPU metrics ({esc(message or 'NVML is not available')}): "
            "showing CPU and memory only.</div>")

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
