"""Headless Chromium for the page tests: Debian's /usr/bin/chromium driven by Playwright (no browser download).

.ci/run installs chromium and the test extra has playwright, so in CI these tests run; elsewhere they skip with
the reason. ``watched_page`` records every request's path and every failed response, so a test can say that a
page loaded completely and never left the server's base_url. The ``browser`` fixture (one Chromium per module) is
offered to every integration test by conftest.py; ``opened`` is a watched page for one block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(__file__).resolve().parents[2] / ".test-screenshots"
"""Where a failing page test leaves its screenshot (git-ignored)."""
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


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


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for a module's page tests."""
    yield from launch()


@dataclass
class Watched:
    page: Any
    paths: list[str] = field(default_factory=list)  # every http(s) request's path, without the leading /
    failed: list[str] = field(default_factory=list)  # "STATUS URL" of every response >= 400
    dialogs: list[str] = field(default_factory=list)  # alert/confirm/prompt texts (dismissed)


def watched_page(browser: Any) -> Watched:
    w = Watched(browser.new_page())
    w.page.on(
        "request", lambda r: r.url.startswith("http") and w.paths.append(r.url.split("//", 1)[1].split("/", 1)[1])
    )
    w.page.on("response", lambda r: r.status >= 400 and w.failed.append(f"{r.status} {r.url}"))

    def dialog(d: Any) -> None:
        w.dialogs.append(d.message)
        d.dismiss()

    w.page.on("dialog", dialog)
    return w


@contextlib.contextmanager
def opened(browser: Any, shot: str | None = None, viewport: tuple[int, int] | None = None) -> Iterator[Watched]:
    """A watched page (of ``viewport`` width and height where given) that is closed when the block ends; where
    ``shot`` names one, a block that fails leaves the page's screenshot in SHOTS/<shot>.png."""
    w = watched_page(browser)
    if viewport:
        w.page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    try:
        yield w
    except Exception:
        if shot:
            SHOTS.mkdir(exist_ok=True)
            w.page.screenshot(path=str(SHOTS / f"{shot}.png"))
        raise
    finally:
        w.page.close()


def pai_sidebar(page: Any, server: Any, workspace: str) -> Any:
    """Open JupyterLab of ``server`` in a fresh layout named ``workspace`` (the sidebar starts closed), wait for
    pai_jupyter's labextension and open its jobs sidebar; the sidebar's panel."""
    page.goto(f"{server.url}lab/workspaces/{workspace}?reset&token={server.token}")
    page.locator("body[data-pai-jupyter='active']").wait_for(state="attached", timeout=90_000)
    page.locator(".jp-SideBar [data-id='pai-jobs-panel']").click()
    panel = page.locator("#pai-jobs-panel")
    panel.wait_for(state="visible", timeout=30_000)
    return panel
