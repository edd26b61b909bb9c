"""P22: a JupyterHub spawn on the embedded cluster, from the click on the spawn page's Start to JupyterLab ready,
beside a plain ``jupyterhub`` whose LocalProcessSpawner starts the same server.

- PAI: ``pai hub start`` (PAISpawner, shared-password sign-in) in front of a root daemon of the process runtime:
  the server is a job, run by the person's ``pai-`` account.
- Baseline: JupyterHub with its LocalProcessSpawner (its proxy started by the Hub), the same single-user server:
  the same Python (``jupyterhub.singleuser`` with JupyterLab and pai_jupyter), run by the same account, in the same
  HOME and root directory, as a child process of the Hub.

Both are driven the same way, by Chromium (Playwright): sign in, open ``/hub/spawn``, click Start; the clock stops
when JupyterLab's launcher is on screen at ``/user/NAME/lab``. Chromium rather than the Hub's REST API and a poll of
the Lab page: the figure is the wait a person sees, and it holds what only the page does, the same for both Hubs (the
Hub's slow-spawn redirect to the pending page, its progress event stream and the redirect it triggers, the proxy's
new route, the Lab's own load). Each round has a fresh browser context (a cold cache for both); the server is
stopped through the Hub's REST API between rounds (untimed). Rounds alternate, PAI first (its first spawn makes the
account the baseline's server runs as too).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pai_jupyter.common.localserver import free_port
from tests.helpers.browser import CHROMIUM, CHROMIUM_FLAGS
from tests.helpers.daemon import account_of
from tests.helpers.servers import CHP_IN_CHECKOUT, HubServer, servers
from tests.polling import wait_for

from .common import Figure, median, ratio

ROUNDS = 3  # spawns of each Hub per run (the run's figure: their medians)
USER = "p22"
READY_S = 240.0


def _spawn(browser: Any, url: str, user: str, password: str) -> float:
    """Sign in at ``url`` (a fresh context), open the spawn page, click Start: seconds until the Lab's launcher."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(url + "hub/login")
        page.fill("#username_input", user)
        page.fill("#password_input", password)
        page.click("#login_submit")
        page.wait_for_url(re.compile(r".*/hub/(spawn|home).*"), timeout=60_000)
        page.goto(url + "hub/spawn")
        start = page.locator("#spawn_form button[type=submit]")
        start.wait_for(timeout=60_000)
        t0 = time.perf_counter()
        start.click()
        page.wait_for_url(re.compile(f".*/user/{user}/lab.*"), timeout=READY_S * 1000)
        page.locator(".jp-Launcher").first.wait_for(timeout=READY_S * 1000)
        return time.perf_counter() - t0
    finally:
        context.close()


def _stop(api: httpx.Client, user: str) -> None:
    """Stop ``user``'s server through the Hub's REST API and wait until the Hub has none."""
    r = api.delete(f"/users/{user}/server")
    if r.status_code not in (202, 204):
        raise RuntimeError(f"the Hub refused to stop {user}'s server: {r.status_code} {r.text[:300]}")
    wait_for(lambda: not api.get(f"/users/{user}").json().get("servers"), 120, f"{user}'s server stopped")


BASELINE_CONFIG = """
import pwd
from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid

ACCOUNT, HOME = {account!r}, {home!r}


class SameServer(LocalProcessSpawner):
    '''The PAI server's account, HOME and root directory for the Hub user (LocalProcessSpawner takes the account
    of the Hub user's name, and that account's passwd home).'''

    def make_preexec_fn(self, name):
        return set_user_setuid(ACCOUNT)

    def user_env(self, env):
        env.update(USER=ACCOUNT, HOME=HOME, SHELL=pwd.getpwnam(ACCOUNT).pw_shell)
        return env


c.JupyterHub.ip = '127.0.0.1'
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = '127.0.0.1'
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = 'sqlite:///{folder}/jupyterhub.sqlite'
c.JupyterHub.cookie_secret_file = '{folder}/cookie_secret'
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{proxy_api_port}'
c.JupyterHub.authenticator_class = 'shared-password'
c.SharedPasswordAuthenticator.user_password = {password!r}
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = SameServer
c.Spawner.cmd = [{python!r}, '-m', 'jupyterhub.singleuser']
c.Spawner.notebook_dir = HOME
c.Spawner.options_form = '<p>The defaults.</p>'  # a spawn page with a Start button, as PAISpawner's
c.JupyterHub.services = [{{'name': 'bench', 'api_token': {token!r}}}]
c.JupyterHub.load_roles = [{{'name': 'bench', 'scopes': ['admin:servers', 'admin:users'], 'services': ['bench']}}]
"""


@contextlib.contextmanager
def _baseline(folder: Path, python: str, account: str, home: str) -> Iterator[tuple[str, str, httpx.Client]]:
    """A plain JupyterHub in ``folder``: (its URL, the sign-in password, a client of its REST API)."""
    port, password, token = free_port(), secrets.token_urlsafe(12), secrets.token_hex(32)
    config = folder / "jupyterhub_config.py"
    config.write_text(
        BASELINE_CONFIG.format(
            account=account,
            home=home,
            port=port,
            hub_port=free_port(),
            folder=folder,
            proxy=str(CHP_IN_CHECKOUT),
            proxy_api_port=free_port(),
            password=password,
            python=python,
            token=token,
        )
    )
    url = f"http://127.0.0.1:{port}/"
    with open(folder / "hub.log", "ab") as log:
        hub = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(config)],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    api = httpx.Client(base_url=url + "hub/api", headers={"Authorization": f"token {token}"}, timeout=60)
    try:

        def up() -> bool:
            if hub.poll() is not None:
                raise RuntimeError(f"the baseline JupyterHub exited: {(folder / 'hub.log').read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                return api.get("/").status_code == 200
            return False

        wait_for(up, 120, "the baseline JupyterHub answering")
        yield url, password, api
    finally:
        api.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hub.pid, signal.SIGTERM)  # the Hub stops its servers and its proxy
        try:
            hub.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
            hub.wait()


def p22_hub_spawn() -> Figure:
    fig = Figure("P22", "JupyterHub: spawn click -> JupyterLab ready", "s", "<= 1.3x LocalProcessSpawner + 1 s")
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        raise RuntimeError(f"no browser at {CHROMIUM}")
    with tempfile.TemporaryDirectory(prefix="pai-bench-p22-") as tmp, servers(Path(tmp)) as s:
        admin = s.daemon(cpus=2, memory_mb=8192)
        try:
            hub: HubServer = s.hub()
        except pytest.skip.Exception as exc:  # (a BaseException: the bench's run would stop at it)
            raise RuntimeError(f"no JupyterHub here: {exc}") from None
        api = hub.api(hub.token(hub.admin))
        pai: list[float] = []
        local: list[float] = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
            try:
                pai.append(_spawn(browser, hub.url, USER, hub.password()))
                _stop(api, USER)
                account = account_of(Path(admin.home), USER)
                home = str(Path(admin.home) / "local" / "users" / USER / "home")  # the PAI server's HOME
                folder = Path(tmp) / "baseline"
                folder.mkdir()
                with _baseline(folder, hub.python, account.pw_name, home) as (url, password, base_api):
                    for n in range(ROUNDS):
                        local.append(_spawn(browser, url, USER, password))
                        _stop(base_api, USER)
                        if n + 1 < ROUNDS:
                            pai.append(_spawn(browser, hub.url, USER, hub.password()))
                            _stop(api, USER)
            finally:
                browser.close()
    fig.value, fig.baseline = median(pai), median(local)
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= 1.3 * f.baseline + 1.0)
    each = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    fig.note = (
        f"median of {len(pai)} spawns each, alternating (PAI {each(pai)} s; baseline {each(local)} s); Chromium: "
        f"click on the spawn page's Start -> JupyterLab's launcher shown; PAI: `pai hub start` (PAISpawner, the "
        f"server a job of the process runtime); baseline: jupyterhub with LocalProcessSpawner, the same "
        f"jupyterhub-singleuser (same Python, account, HOME); a fresh browser context per spawn"
    )
    return fig
