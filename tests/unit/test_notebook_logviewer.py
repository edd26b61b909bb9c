"""LogViewer: bounded memory, lines split across chunks, escaping, stream switch, the full-log download."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator

from pai_jupyter.notebook.logviewer import MAX_PARTIAL, LogViewer
from tests.polling import wait_for


def test_only_the_last_lines_are_kept() -> None:
    v = LogViewer("j", max_lines=5, start=False)
    for i in range(100):
        v.feed(f"line {i}\n")
    assert list(v.lines) == [f"line {i}" for i in range(95, 100)] and v.total == 100
    v.render()
    assert "line 99" in v.view.value and "line 94" not in v.view.value
    assert "last 5 of 100 lines" in v.status.value


def test_lines_split_across_chunks_and_an_endless_line_is_cut() -> None:
    v = LogViewer("j", max_lines=10, start=False)
    v.feed("hel")
    v.feed("lo\nwor")
    assert list(v.lines) == ["hello"] and v.partial == "wor" and v.text() == "hello\nwor"
    v.feed("x" * (3 * MAX_PARTIAL))
    assert len(v.partial) <= MAX_PARTIAL and all(len(line) <= MAX_PARTIAL for line in v.lines)


def test_log_text_is_escaped() -> None:
    v = LogViewer("j", start=False)
    v.feed("<script>alert(1)</script>\n")
    v.render()
    assert "<script>" not in v.view.value and "&lt;script&gt;alert(1)&lt;/script&gt;" in v.view.value


class Follow:
    """A follow() stand-in: per stream, yields chunks; the 'all' stream waits until released. ``done`` lists the
    streams whose follower has let go of them (read to the end, or closed after its last chunk)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[tuple[str | None, int, str]] = []
        self.done: list[str] = []

    def __call__(self, job: str, *, role: str | None, index: int, stream: str) -> Iterator[str]:
        self.calls.append((role, index, stream))
        try:
            yield f"{stream} one\n{stream} t"
            if stream == "all":
                self.release.wait(5)
            yield "wo\n"
        finally:
            self.done.append(stream)


def test_follows_in_the_background_and_restarts_on_a_stream_switch() -> None:
    follow = Follow()
    v = LogViewer("j", role="w", index=2, follow=follow)
    wait_for(lambda: list(v.lines) == ["all one"])
    v.stream.value = "stderr"
    wait_for(lambda: list(v.lines) == ["stderr one", "stderr two"] and "ended" in v.status.value)
    follow.release.set()  # the old follower wakes up and must not write into the new view
    wait_for(lambda: "all" in follow.done, 5, "the old follower to take its last chunk")
    assert list(v.lines) == ["stderr one", "stderr two"]
    assert follow.calls == [("w", 2, "all"), ("w", 2, "stderr")]
    v.close()


class Logs:
    def logs(self, job: str, *, role: str | None, index: int, stream: str) -> str:
        return f"full {stream} log of {job} <b>\n" * 3


def test_full_log_is_a_download_link_and_the_buffer_stays_small() -> None:
    v = LogViewer("ann~j", client=Logs(), max_lines=1, start=False)
    v.download()
    link = v.download_link.value
    assert 'download="ann_j-task-0-all.log"' in link and "<b>" not in link.split("base64,")[0]
    payload = link.split("base64,")[1].split('"')[0]
    assert base64.b64decode(payload).decode() == "full all log of ann~j <b>\n" * 3
    assert list(v.lines) == []
