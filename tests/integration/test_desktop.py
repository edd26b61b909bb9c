"""The desktop plugin: a VNC display in a process-runtime task, noVNC through the Jupyter server's proxy, in a real
browser; and who may not reach it."""

from __future__ import annotations

import asyncio
import contextlib
import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from tornado.httpclient import HTTPClientError

from pai_jupyter.client import Client
from pai_jupyter.cluster.task.desktop import BACKGROUND
from pai_jupyter.server.desktop import LOAD_S, RELOADS
from tests.helpers.browser import opened, pai_sidebar
from tests.helpers.daemon import Api
from tests.helpers.desktop import count_colors, desktop_job, need_desktop, running_desktop
from tests.helpers.jupyter_fixture import jupyter, start_jupyter, task_url
from tests.polling import wait_for


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def _pixel(png: bytes, x: float, y: float) -> tuple[int, int, int]:
    """The colour at (x, y), as fractions of the image's width and height."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    return img.getpixel((int(img.width * x), int(img.height * y)))  # type: ignore[return-value]


def test_desktop_in_the_browser_through_the_proxy(daemon: Api, pai_home: Path, tmp_path: Path, browser: Any) -> None:
    need_desktop()
    pai = Client()
    job = pai.submit(desktop_job("desk"))
    pai.wait(job, until={"RUNNING"})
    svc = wait_for(
        lambda: next((s for s in pai.services(job) if s.name == "desktop" and s.state == "running"), None),
        60,
        "the desktop service",
    )
    # websockify serves no files (noVNC's come from the Jupyter server) and takes no websocket without the token
    assert httpx.get(f"http://{svc.host}:{svc.port}/vnc.html", timeout=10).status_code == 405
    with jupyter(tmp_path / "jupyter", pai_home) as js:
        with opened(browser) as w:
            page = w.page
            page.goto(f"{js.url}api/status?token={js.token}")  # signs the browser in (cookie)
            page.goto(js.url + task_url(job, "desktop/"))
            page.wait_for_selector("body[data-state=connected]", timeout=60_000)
            canvas = page.locator("#screen canvas")

            def drawn() -> bool:  # the window manager's background and the xterm: more than one colour
                return count_colors(canvas.screenshot()) > 2

            wait_for(drawn, 60, "a desktop drawn on the noVNC canvas")
            html = page.content()
            assert svc.token and svc.token not in page.url and svc.token[:8] not in page.url
        assert "password" in html
        http = js.http(token=None)
        assert http.get(task_url(job, "desktop/")).status_code in (302, 403)  # no login: no desktop, no password
        assert svc.token[:8] not in http.get(task_url(job, "desktop/")).text
        assert http.get("pai/novnc/core/rfb.js").status_code in (302, 403)  # noVNC's scripts: signed in only
        rfb = js.http().get("pai/novnc/core/rfb.js")
        assert rfb.status_code == 200 and rfb.headers["Content-Type"].startswith("text/javascript")
        assert js.http().get("pai/novnc/app/ui.js").status_code == 404  # core/ and vendor/ scripts, nothing else
        assert js.http().get("pai/novnc/core/..%2f..%2f..%2fetc%2fpasswd.js").status_code in (403, 404)
        assert js.http().get(task_url("mallory~desk", "desktop/")).status_code == 404

        async def websocket(job_id: str, token: str | None) -> int:
            try:
                ws = await js.ws(task_url(job_id, "desktop/websockify"), token=token)
            except HTTPClientError as exc:
                return exc.code
            ws.close()
            return 101

        def run(job_id: str, token: str | None) -> int:  # own thread: Playwright's loop runs in this one
            with ThreadPoolExecutor(1) as pool:
                return pool.submit(asyncio.run, websocket(job_id, token)).result()

        assert run(job, None) == 403  # the VNC websocket: Jupyter's login first
        assert run("mallory~desk", "own") == 404
        assert run(job, "own") == 101
        assert svc.token[:8] not in js.log_text()

    # stopping (what idle culling does) takes the display and everything on it down
    def on_display() -> bool:  # this job's (another test's desktop may be up meanwhile)
        for p in psutil.process_iter(["cmdline"]):
            if "pai-desktop." in " ".join(p.info["cmdline"] or []):
                with contextlib.suppress(psutil.Error):
                    if p.environ().get("PAI_JOB_NAME") == job.split("~", 1)[1]:
                        return True
        return False

    assert on_display()
    pai.service_action(job, "main", 0, "desktop", "stop")
    wait_for(lambda: {s.name: s.state for s in pai.services(job)}["desktop"] == "stopped", 30, "the stop")
    wait_for(lambda: not on_display(), 30, "Xvnc and websockify to end")


def test_the_desktop_page_reconnects_by_itself_when_the_desktop_comes_back(
    daemon: Api, pai_home: Path, tmp_path: Path, browser: Any
) -> None:
    """A desktop that goes away under an open page (culled, restarted, or not up yet as the tab opened with the
    job) is connected again by the page, with no reload: its next try starts the desktop on demand."""
    pai = Client()
    job = running_desktop(pai, "desk-again")
    with jupyter(tmp_path / "jupyter", pai_home) as js, opened(browser) as w:
        page = w.page
        page.goto(f"{js.url}api/status?token={js.token}")
        page.goto(js.url + task_url(job, "desktop/"))
        page.wait_for_selector("body[data-state=connected]", timeout=60_000)
        pai.service_action(job, "main", 0, "desktop", "stop")
        page.locator("#status", has_text="reconnecting").wait_for(timeout=30_000)
        assert page.locator("body[data-failures]").count() == 1  # the failed tries, counted until a connect
        page.wait_for_selector("body[data-state=connected]", timeout=90_000)
        wait_for(lambda: count_colors(page.locator("#screen canvas").screenshot()) > 2, 60, "the desktop drawn again")
        assert page.locator("#screen canvas").count() == 1  # the new connection's canvas only
        assert page.locator("body[data-failures]").count() == 0
    pai.stop(job)


def test_the_desktop_page_loads_itself_again_when_novnc_did_not_load(
    daemon: Api, pai_home: Path, tmp_path: Path, browser: Any
) -> None:
    """One of noVNC's modules not loading (a busy server, a network blip) would leave the page "connecting…" for
    ever: a request never answered (for LOAD_S) or failed, it loads itself again and connects. Where the modules
    never load, it stops after RELOADS and says so."""
    pai = Client()
    job = running_desktop(pai, "desk-load")
    with jupyter(tmp_path / "jupyter", pai_home) as js, opened(browser) as w:
        page, seen = w.page, []

        def hang_then_fail_then_serve(route: Any) -> None:
            seen.append(route.request.url)
            if len(seen) == 2:
                route.abort()
            elif len(seen) > 2:
                route.continue_()
            # the first is never answered

        page.route("**/pai/novnc/core/websock.js", hang_then_fail_then_serve)
        page.goto(f"{js.url}api/status?token={js.token}")
        page.goto(js.url + task_url(job, "desktop/"))
        page.wait_for_selector("body[data-state=connected]", timeout=LOAD_S * 1000 + 60_000)
        assert len(seen) == 3

        page.unroute("**/pai/novnc/core/websock.js")
        page.route("**/pai/novnc/core/websock.js", lambda route: route.abort())
        page.reload()
        page.locator("#status", has_text="did not load:").wait_for(timeout=60_000)
        assert page.locator("body[data-state=unloaded]").count() == 1
        assert sum("pai/novnc/core/websock.js" in p for p in w.paths) == 3 + 1 + RELOADS  # then no more reloads
    pai.stop(job)


def test_the_desktop_is_drawn_in_the_labs_tab_before_any_click(
    daemon: Api, pai_home: Path, tmp_path: Path, browser: Any
) -> None:
    """Opened from the job page's Desktop button, the desktop shows in its Lab tab at once: no black canvas
    waiting for a click (nothing is clicked in the frame; its screenshot after the connect has the desktop)."""
    pai = Client()
    running_desktop(pai, "desk-lab")
    server = start_jupyter(tmp_path / "jupyter", pai_home, lab=True)
    try:
        with opened(browser, shot="desktop-in-the-lab", viewport=(1400, 900)) as w:
            page = w.page
            panel = pai_sidebar(page, server, "desktop-lab")
            panel.locator(".pai-JobRow", has_text="desk-lab").click()
            page.get_by_role("button", name="Remote desktop of main[0]").click()
            frame = page.frame_locator(".pai-ServiceFrame iframe").last
            frame.locator("body[data-state=connected]").wait_for(state="attached", timeout=60_000)
            canvas = frame.locator("#screen canvas")
            box = canvas.bounding_box()
            assert box and box["width"] > 200 and box["height"] > 150, box  # sized to the visible tab

            def drawn() -> bool:  # the window manager's background and the xterm: more than one colour
                return count_colors(canvas.screenshot()) > 2

            wait_for(drawn, 60, "a desktop drawn in the Lab's tab, with no click in it")
            # where no window is (bottom left, under the xterm; the Lab's toasts are on the right): the root
            # window's colour, not Xvnc's black, which looked like a desktop not drawn until a click
            corner = _pixel(canvas.screenshot(), 0.03, 0.97)
            assert corner == _rgb(BACKGROUND), corner
    finally:
        server.stop()


@pytest.mark.docker
def test_an_image_without_the_desktop_programs_says_so(docker_daemon: Api) -> None:
    pai = Client()
    job = pai.submit(desktop_job("nodesk"))  # pai-test/busybox has no Xvnc, websockify or noVNC
    pai.wait(job, until={"RUNNING"}, timeout=60)
    svc = wait_for(
        lambda: next((s for s in pai.services(job) if s.state == "unavailable"), None),
        60,
        "the desktop service to say why it cannot start",
    )
    assert svc.name == "desktop" and "needs Xvnc" in str(svc.message) and "tigervnc" in str(svc.message)
    pai.stop(job)
