"""LogViewer: follow one task's stdout / stderr / all in a widget, with bounded memory.

A training log can be gigabytes; the viewer keeps only the last ``max_lines`` lines (a deque) and an
over-long unterminated line is cut, so the kernel's memory stays flat however long the job runs. The whole
log stays on the server: "Full log" fetches it on demand as a download link.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import ipywidgets as W

from .display import download_html, error_html, esc

if TYPE_CHECKING:
    from ..client import Client

MAX_PARTIAL = 64 * 1024  # an unterminated line longer than this is shown as a line of its own
RENDER_EVERY = 0.2  # seconds between redraws while text streams in


class LogViewer(W.VBox):
    """``LogViewer(job, role=, index=, stream=)``; ``follow`` (default: ``client.follow``) yields text as written."""

    def __init__(
        self,
        job: Any,
        *,
        client: Client | None = None,
        role: str | None = None,
        index: int = 0,
        stream: str = "all",
        max_lines: int = 1000,
        follow: Callable[..., Iterable[str]] | None = None,
        start: bool = True,
        **kw: Any,
    ):
        super().__init__(**kw)
        self._client = client
        self.job, self.role, self.index = job, role, index
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.partial = ""
        self.total = 0  # lines seen since the viewer (re)started
        self._follow = follow
        self._generation = 0
        self._last_render = 0.0
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self.stream = W.ToggleButtons(options=["all", "stdout", "stderr"], value=stream)
        self.view = W.HTML()
        self.status = W.HTML()
        self.download_button = W.Button(
            description="Full log", icon="download", tooltip="fetch the whole log from the server as a download link"
        )
        self.download_link = W.HTML()
        self.children = [W.HBox([self.stream, self.download_button, self.download_link]), self.view, self.status]
        self.stream.observe(lambda _: self.restart(), names="value")
        self.download_button.on_click(lambda _: self.download())
        self.render()
        if start:
            self.restart()

    @property
    def client(self) -> Client:
        if self._client is None:
            from ..client import Client

            self._client = Client()
        return self._client

    # ---- text in -----------------------------------------------------------------------------------------------
    def feed(self, chunk: str) -> None:
        """Take a piece of log text (any split); complete lines go to the bounded buffer."""
        with self._lock:
            text = self.partial + chunk
            parts = text.split("\n")
            self.partial = parts.pop()
            while len(self.partial) > MAX_PARTIAL:
                parts.append(self.partial[:MAX_PARTIAL])
                self.partial = self.partial[MAX_PARTIAL:]
            self.lines.extend(parts)
            self.total += len(parts)

    def text(self) -> str:
        """What is kept: the last lines, and the line being written."""
        with self._lock:
            return "\n".join([*self.lines, self.partial] if self.partial else self.lines)

    def render(self) -> None:
        self._last_render = time.monotonic()
        shown = len(self.lines)
        self.view.value = (
            f"<pre style='max-height:420px;overflow:auto;white-space:pre-wrap;margin:0'>{esc(self.text())}</pre>"
        )
        dropped = self.total - shown
        note = f"last {shown} of {self.total} lines (the full log is on the server)" if dropped > 0 else ""
        self.status.value = f"<small>{esc(note)}</small>" if note else ""

    def _render_soon(self) -> None:
        """Redraw now, or once a short while from now: a burst of chunks costs one redraw, a lone one is shown."""
        if time.monotonic() - self._last_render >= RENDER_EVERY:
            self.render()
        elif self._timer is None or not self._timer.is_alive():
            self._timer = threading.Timer(RENDER_EVERY, self.render)
            self._timer.daemon = True
            self._timer.start()

    # ---- following -------------------------------------------------------------------------------------------
    def restart(self) -> None:
        """(Re)start following the chosen stream from its beginning; a previous follower stops writing."""
        with self._lock:
            self._generation += 1
            self.lines.clear()
            self.partial, self.total = "", 0
        self.render()
        gen = self._generation
        threading.Thread(target=self._run, args=(gen,), daemon=True, name="pai-logviewer").start()

    def stop(self) -> None:
        self._generation += 1

    def _run(self, gen: int) -> None:
        follow = self._follow or self.client.follow
        try:
            for chunk in follow(self.job, role=self.role, index=self.index, stream=self.stream.value):
                if gen != self._generation:
                    return
                self.feed(chunk)
                self._render_soon()
        except Exception as exc:
            if gen == self._generation:
                self.status.value = error_html(f"log follow ended: {exc}")
                return
        if gen == self._generation:
            self.render()
            self.status.value += "<small> — the task has ended</small>"

    def close(self) -> None:
        self.stop()
        super().close()

    # ---- the whole log ---------------------------------------------------------------------------------------
    def full_log(self) -> str:
        return self.client.logs(self.job, role=self.role, index=self.index, stream=self.stream.value)

    def download(self) -> None:
        """A link that saves the whole log (fetched now) as a file; the buffer is not touched."""
        try:
            data = self.full_log()
        except Exception as exc:
            self.download_link.value = error_html(f"could not fetch the log: {exc}")
            return
        name = f"{str(self.job).replace('~', '_')}-{self.role or 'task'}-{self.index}-{self.stream.value}.log"
        self.download_link.value = download_html(name, data, "text/plain", f"{name} ({len(data):,} characters)")
