"""Headless Chromium for the page tests: Debian's /usr/bin/chromium driven by Playwright (no browser download).

.ci/run installs chromium and the test extra has playwright, so in CI these tests run; elsewhere they skip with
the reason. ``watched_page`` records every request's path and every failed response, so a test can say that a
page loaded completely and never left the server's base_url. The ``browser`` fixture (one Chromium per module) is
offered to every integration test by conftest.py; ``opened`` is a watched page for one block, ``open_lab_page`` the
body of a module's ``lab_page`` fixture (a page with the PAI sidebar open); the other helpers are the steps many page
tests take in JupyterLab (open a notebook and run it, start a notebook from a launcher card).
"""

from __future__ import annotations

import contextlib
import re
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


def pai_sidebar(page: Any, server: Any, workspace: str, timeout: float = 90_000) -> Any:
    """Open JupyterLab of ``server`` in a fresh layout named ``workspace`` (the sidebar starts closed), wait for
    pai_jupyter's labextension (``timeout`` ms), open its jobs sidebar and wait for its first job list; the
    sidebar's panel. The first list is the notifier's baseline (it tells only of changes after it), so a test
    that submits before it arrived could see its job already running in it, and no notice."""
    return sidebar_at(page, f"{server.url}lab/workspaces/{workspace}?reset&token={server.token}", timeout)


def sidebar_at(page: Any, url: str, timeout: float = 90_000) -> Any:
    """``pai_sidebar`` for the JupyterLab page at ``url`` (one a cookie signs in to, e.g. behind JupyterHub)."""
    page.goto(url)
    lab_loaded(page, timeout)
    tab = page.locator(".jp-SideBar [data-id='pai-jobs-panel']")
    try:
        tab.click(timeout=30_000)
    except Exception:  # (playwright's TimeoutError)
        if not page.locator(THEME_ERROR).count():
            raise
        # JupyterLab's own stylesheet request failed and its dialog covers the page (seen once in CI, a quiet run:
        # jupyterlab_server's theme file, which nothing of ours serves); a person reloads, and so does this, once
        page.reload()
        lab_loaded(page, timeout)
        tab.click(timeout=30_000)
    panel = page.locator("#pai-jobs-panel")
    panel.wait_for(state="visible", timeout=30_000)
    first = panel.locator(".pai-JobsPanel-profile", has_text=" · ")  # "{profile} · {user}", hidden beside a switch
    first.wait_for(state="attached", timeout=60_000)
    return panel


THEME_ERROR = "dialog[aria-label^='Error Loading Theme']"


def lab_loaded(page: Any, timeout: float) -> None:
    """Wait for pai_jupyter's labextension and for Lab's layout to be restored (its splash goes then, as Galata
    waits for): the launcher it opens after that takes the focus, and a command palette open then closes again."""
    page.locator("body[data-pai-jupyter='active']").wait_for(state="attached", timeout=timeout)
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=timeout)


def run_from_palette(page: Any, label: str, shows: str) -> None:
    """Run the command labelled ``label`` from JupyterLab's command palette (Ctrl+Shift+C) until the element
    ``shows`` (a CSS selector: what the command opens) is visible. Enter goes once the palette has made the command
    its active item (an Enter before the palette filtered ran nothing). Lab closes the palette when another widget
    takes the focus, so under load the keys can land nowhere: up to 3 tries, each checked by what it opened."""
    palette = page.locator(".lm-CommandPalette-input")
    label_re = re.compile(f"^{re.escape(label)}$")
    active = page.locator(".lm-CommandPalette-item.lm-mod-active .lm-CommandPalette-itemLabel", has_text=label_re)
    opened = page.locator(shows).first
    for _ in range(3):
        with contextlib.suppress(Exception):  # (playwright's TimeoutError: try again)
            page.keyboard.press("Control+Shift+C")
            palette.fill(label, timeout=5_000)
            active.wait_for(state="attached", timeout=5_000)
            palette.press("Enter")
            opened.wait_for(state="visible", timeout=10_000)
        if opened.is_visible():
            return
        if palette.is_visible():
            page.keyboard.press("Escape")
    opened.wait_for(state="visible", timeout=10_000)  # the last try's error, if it never opened


def open_lab_page(browser: Any, server: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The body of a module's ``lab_page`` fixture (``yield from`` it): a 1400x900 Lab page of ``server`` with the PAI
    sidebar open in a fresh layout named after the test; a test that failed leaves its screenshot in SHOTS, and
    no browser dialog (alert, confirm, prompt) may have shown."""
    w = watched_page(browser)
    page = w.page
    page.set_viewport_size({"width": 1400, "height": 900})
    pai_sidebar(page, server, request.node.name.replace("_", "-"))
    failed = request.session.testsfailed
    yield page
    if request.session.testsfailed > failed:
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{request.node.name}.png"))
    page.close()
    assert not w.dialogs, w.dialogs


def open_notebook(page: Any, server: Any, name: str) -> None:
    """Open notebook ``name`` (a path under the server's root) in JupyterLab and wait until its kernel is idle."""
    notebook_at(page, f"{server.url}lab/tree/{name}?token={server.token}", 90_000)


def notebook_at(page: Any, url: str, timeout: float) -> None:
    """Open the notebook at JupyterLab URL ``url`` and wait (``timeout`` ms) until its kernel is idle. When Lab's own
    theme stylesheet did not load, its dialog covers the page and no status shows (CI-31, behind JupyterHub's
    proxy under load): a person reloads, and so does this, once."""
    page.goto(url)
    idle = page.get_by_text("| Idle").first
    idle.or_(page.locator(THEME_ERROR)).first.wait_for(timeout=timeout)
    if page.locator(THEME_ERROR).count():
        page.reload()
    idle.wait_for(timeout=timeout)


def run_all_cells(page: Any) -> None:
    """Run > Run All Cells in the open notebook."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def new_notebook_from_launcher(page: Any, server: Any, card: str) -> None:
    """Open JupyterLab's launcher and click the card (a kernel) named ``card``: a new notebook on that kernel."""
    page.goto(f"{server.url}lab?token={server.token}")
    found = page.locator(".jp-LauncherCard", has_text=card).first
    found.wait_for(timeout=90_000)
    found.click()
