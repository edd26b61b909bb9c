"""Headless Chromium for the page tests: Debian's /usr/bin/chromium driven by Playwright (no browser download).

.ci/run installs chromium and the test extra has playwright, so in CI these tests run; elsewhere they skip with
the reason. ``watched_page`` records every request's path and every failed response, so a test can say that a
page loaded completely and never left the server's base_url.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]


def launch() -> Iterator[Any]:
    """A Chromium browser for a module's tests (use as a generator fixture body)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    if not CHROMIUM.exists():
        pytest.skip(f"no browser at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        found = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        try:
            yield found
        finally:
            found.close()


@dataclass
class Watched:
    page: Any
    paths: list[str] = field(default_factory=list)  # every http(s) request's path, without the leading /
    failed: list[str] = field(default_factory=list)  # "STATUS URL" of every response >= 400
    dialogs: list[str] = field(default_factory=list)  # alert/confirm/prompt texts (dismissed)


def watched_page(browser: Any) -> Watched:
    w = Watched(browser.new_page())
    w.page.on("request", lambda r: r.url.startswith("http")
              and w.paths.append(r.url.split("//", 1)[1].split("/", 1)[1]))
    w.page.on("response", lambda r: r.status >= 400 and w.failed.append(f"{r.status} {r.url}"))

    def dialog(d: Any) -> None:
        w.dialogs.append(d.message)
        d.dismiss()

    w.page.on("dialog", dialog)
    return w
