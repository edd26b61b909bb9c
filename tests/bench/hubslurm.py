"""P22S: JupyterHub on Slurm, click -> Lab ready, PAISpawner beside batchspawner's SlurmSpawner on the same cluster.

The local two-node test cluster (tests/slurm/cluster.sh: nodes are network namespaces on a bridge, so a user's
server runs on another host), and two JupyterHubs in front of it, each with its own configurable-http-proxy:

- ``pai hub start --backend slurm`` (PAISpawner, before a root daemon on the Slurm runtime): the person submits the
  spawn page's form (1 CPU, 1024 MB);
- batchspawner 1.3.0's ``SlurmSpawner`` with the configuration this cluster needs (``BATCHSPAWNER_CONFIG``, its
  lines counted in the note): the person clicks Start My Server on the Hub's home page (no form).

Each round, in Chromium, one person per Hub (signed in before) starts their server, from the click until JupyterLab
shows its launcher (the same jupyterhub-singleuser and JupyterLab on the node for both: the Python of
``PAI_TEST_HUB_TOOLS``, else ``PAI_TEST_TASK_TOOLS``, else /opt/pai-task-tools; batchspawner 1.3.0 from PyPI sits
in a venv under /tmp, made once, which its Hub runs from and the servers' Python finds on its PYTHONPATH); then the
Hub stops it. The Hubs alternate who goes first. Figure: PAISpawner's median; baseline: batchspawner's; target: no
slower.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pai_jupyter.common.localserver import free_port
from tests.helpers.browser import CHROMIUM, CHROMIUM_FLAGS
from tests.helpers.servers import CHP_IN_CHECKOUT, HUB_TOOLS, HubServer
from tests.polling import wait_for

from .common import Daemon, Figure, median, ratio
from .slurm import _cluster, _missing

ROUNDS = 3
BATCHSPAWNER = "batchspawner==1.3.0"
BS_VENV = Path(tempfile.gettempdir()) / "pai-bench-batchspawner"
BS_USER = "paibench-bs"  # batchspawner runs sbatch as the Hub user's own OS account: the bench makes one
PAI_USER = "p22s"  # (its OS account, pai-p22s, is the daemon's to make)
SERVICE_TOKEN = "p22s-bench-service-token-0123456789abcdef"
BS_PASSWORD = "p22s-bench-password"  # (a Hub of the bench's, on loopback, for the minutes it runs)
LAB_READY = ".jp-Launcher"  # a fresh user's JupyterLab, its plugins started

# what this cluster asks of an admin for batchspawner (counted in the note); {placeholders} filled at start
BATCHSPAWNER_CONFIG = """\
c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
c.JupyterHub.hub_ip = "{bridge}"  # the Hub's API where the nodes reach it (this host on their bridge)
c.SlurmSpawner.exec_prefix = "runuser -u {{username}} --"  # sbatch as the user (no sudo on this machine)
c.Spawner.env_keep = ["PATH", "LANG", "SLURM_CONF"]  # how sbatch finds the cluster
c.SlurmSpawner.batchspawner_singleuser_cmd = "{tools_bin}/python3 -m batchspawner.singleuser"
c.Spawner.cmd = ["{tools_bin}/jupyterhub-singleuser"]
c.SlurmSpawner.req_nprocs = "1"
c.SlurmSpawner.req_memory = "1024M"
c.SlurmSpawner.state_exechost_re = r"\\s+n(\\d+)$"  # squeue names the node (n1); the proxy needs its address
c.SlurmSpawner.state_exechost_exp = r"{prefix}1\\1"
c.Spawner.default_url = "/lab"
"""
# not counted: the bench's batchspawner lives in its own venv, not in the servers' Python as a site would install it
# (run there by batchspawner-singleuser's interpreter, JupyterLab would find neither its config nor its assets)
BENCH_ONLY_CONFIG = """\
c.Spawner.environment = {{"PYTHONPATH": "{bs_site}"}}  # the servers' Python finds batchspawner.singleuser there
"""
# the same for either Hub: where people open it, the sign-in, the bench's own API token
COMMON_CONFIG = """\
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.ConfigurableHTTPProxy.command = ["{chp}"]
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = "{password}"
c.Authenticator.allow_all = True
c.JupyterHub.services = [{{"name": "bench", "api_token": "{token}"}}]
c.JupyterHub.load_roles = [{{"name": "bench", "scopes": ["admin:servers", "admin:users"], "services": ["bench"]}}]
c.Spawner.http_timeout = 300
c.Spawner.start_timeout = 300
"""


def _lines(config: str) -> int:
    return sum(1 for line in config.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def _batchspawner_venv(tools: Path) -> Path:
    """A venv under /tmp with batchspawner from PyPI (made once, by the tools' Python) that reads the servers' tools
    (jupyterhub, JupyterLab) through a .pth; its bin/, which every account can run (the server runs as the user)."""
    bin_dir = BS_VENV / "bin"
    if not (bin_dir / "batchspawner-singleuser").exists():
        shutil.rmtree(BS_VENV, ignore_errors=True)
        subprocess.run([str(tools / "bin" / "python3"), "-m", "venv", str(BS_VENV)], check=True, capture_output=True)
        pip = [str(bin_dir / "python3"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
        done = subprocess.run([*pip, BATCHSPAWNER], capture_output=True, text=True, cwd="/")
        if done.returncode != 0:
            shutil.rmtree(BS_VENV, ignore_errors=True)
            raise RuntimeError(f"pip could not install {BATCHSPAWNER}: {done.stderr.strip()[-300:]}")
    tools_site = next((tools / "lib").glob("python3*/site-packages"))
    (next((BS_VENV / "lib").glob("python3*/site-packages")) / "pai-bench-tools.pth").write_text(f"{tools_site}\n")
    subprocess.run(["chmod", "-R", "a+rX", str(BS_VENV)], check=True)
    return bin_dir


@contextlib.contextmanager
def _account(name: str, home: Path) -> Iterator[pwd.struct_passwd]:
    """An OS account for batchspawner's person (it runs sbatch as them; the nodes share this host's accounts); the
    bench's own, so one an interrupted run left is removed first."""
    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        subprocess.run(["userdel", name], check=True, capture_output=True)
    subprocess.run(["useradd", "--system", "-M", "-d", str(home), "-s", "/bin/sh", name], check=True)
    try:
        account = pwd.getpwnam(name)
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, account.pw_uid, account.pw_gid)
        yield account
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        wait_for(lambda: subprocess.run(["userdel", name], capture_output=True).returncode in (0, 6), 10)


@dataclass
class BatchHub:
    """JupyterHub with batchspawner's SlurmSpawner, started by the bench (its own proxy)."""

    folder: Path
    port: int
    config: str
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, python: Path) -> None:
        (self.folder / "jupyterhub_config.py").write_text(self.config)
        log = open(self.folder / "hub.log", "ab")  # noqa: SIM115  (the Hub's, closed when it ends)
        self.proc = subprocess.Popen(
            [str(python), "-m", "jupyterhub", "-f", "jupyterhub_config.py"],
            cwd=self.folder,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        wait_for(lambda: _answers(self.url + "hub/api/") or self.proc.poll() is not None, 120, "batchspawner's Hub")
        if self.proc.poll() is not None:
            raise RuntimeError("batchspawner's Hub exited: " + (self.folder / "hub.log").read_text()[-600:])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def _sign_in(browser: Any, url: str, user: str, password: str) -> Any:
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    page.goto(url + "hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(lambda u: "/hub/spawn" in u or "/hub/home" in u, timeout=60_000)
    return page


def _until_lab(page: Any, user: str) -> None:
    page.wait_for_url(lambda u: f"/user/{user}/lab" in u, timeout=300_000)
    page.locator(LAB_READY).first.wait_for(timeout=120_000)


def _pai_round(page: Any, url: str) -> float:
    """PAISpawner: the spawn page's form, submitted; seconds until the Lab is ready."""
    page.goto(url + "hub/spawn")
    page.fill("#pai-cpu", "1")
    page.fill("#pai-memory", "1024")
    t0 = time.perf_counter()
    page.locator("#spawn_form button[type=submit]").click()
    _until_lab(page, PAI_USER)
    return time.perf_counter() - t0


def _bs_round(page: Any, url: str) -> float:
    """batchspawner: Start My Server on the Hub's home page (it has no form); seconds until the Lab is ready."""
    page.goto(url + "hub/home")
    page.wait_for_function("window._jupyterhub_page_loaded === true", timeout=60_000)
    t0 = time.perf_counter()
    page.click("#start")
    _until_lab(page, BS_USER)
    return time.perf_counter() - t0


def _stop(url: str, user: str, token: str) -> None:
    """The Hub stops the person's server and sees it gone."""
    api = httpx.Client(base_url=url + "hub/api", headers={"Authorization": f"token {token}"}, timeout=120)
    with api:
        api.delete(f"/users/{user}/server")
        wait_for(lambda: not api.get(f"/users/{user}").json().get("servers"), 120, f"{user}'s server stopped")


def p22s_hub_spawn_on_slurm() -> Figure:
    from playwright.sync_api import sync_playwright

    fig = Figure("P22S", "Hub spawn on Slurm: click -> Lab ready, beside batchspawner", "s", "<= batchspawner")
    why = _missing()
    tools = Path(HUB_TOOLS)
    if why is None and not (tools / "bin" / "jupyterhub-singleuser").exists():
        why = f"no jupyterhub-singleuser in {tools} (PAI_TEST_HUB_TOOLS: jupyterhub, jupyterlab, pai_jupyter)"
    if why is None and not CHP_IN_CHECKOUT.exists():
        why = "no configurable-http-proxy in hub/node_modules (make hub)"
    if why is not None:
        fig.note = f"could not run: {why}"
        return fig
    bs_bin = _batchspawner_venv(tools)
    tmp = Path(tempfile.mkdtemp(prefix="pai-bench-p22s-"))
    tmp.chmod(0o755)
    pai_times: list[float] = []
    bs_times: list[float] = []
    hubs: list[Any] = []
    try:
        with (
            _cluster(),
            Daemon("p22s", runtime="slurm", cpus=4, memory_mb=8000) as d,
            _account(BS_USER, tmp / "home" / BS_USER),
        ):
            pai = HubServer(d.home, free_port(), str(tools / "bin" / "python3"), backend="slurm")
            pai.start()
            hubs.append(pai)
            bridge = str(d.info["nodesUrl"]).split("//")[1].rsplit(":", 1)[0]
            admin_config = BATCHSPAWNER_CONFIG.format(
                bridge=bridge, tools_bin=tools / "bin", prefix=bridge[: -len("1")]
            )
            (tmp / "bs").mkdir()
            port = free_port()
            common = COMMON_CONFIG.format(
                port=port,
                hub_port=free_port(),
                proxy_api_port=free_port(),
                chp=CHP_IN_CHECKOUT,
                password=BS_PASSWORD,
                token=SERVICE_TOKEN,
            )
            bs_site = next((BS_VENV / "lib").glob("python3*/site-packages"))
            bs = BatchHub(tmp / "bs", port, common + admin_config + BENCH_ONLY_CONFIG.format(bs_site=bs_site))
            bs.start(bs_bin / "python3")
            hubs.append(bs)
            pai_token = pai.token(pai.admin)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
                pai_page = _sign_in(browser, pai.url, PAI_USER, pai.password())
                bs_page = _sign_in(browser, bs.url, BS_USER, BS_PASSWORD)
                for n in range(ROUNDS):
                    order = [("pai", pai_page), ("bs", bs_page)]
                    for who, page in order if n % 2 == 0 else order[::-1]:
                        if who == "pai":
                            pai_times.append(_pai_round(page, pai.url))
                            _stop(pai.url, PAI_USER, pai_token)
                        else:
                            bs_times.append(_bs_round(page, bs.url))
                            _stop(bs.url, BS_USER, SERVICE_TOKEN)
                browser.close()
    finally:
        for hub in hubs:
            hub.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    fig.value, fig.baseline = median(pai_times), median(bs_times)
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= f.baseline)
    each = ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(pai_times, bs_times, strict=True))
    fig.note = (
        f"{ROUNDS} rounds each, alternating who goes first (PAISpawner/batchspawner s: {each}); both on the 2-node "
        f"test cluster with {tools}/bin/python3's jupyterhub-singleuser and JupyterLab on the node; batchspawner "
        f"{BATCHSPAWNER.split('==')[1]} from {BS_VENV}. The admin configured: PAISpawner 0 lines (pai hub start "
        f"--backend slurm), batchspawner {_lines(admin_config)} (BATCHSPAWNER_CONFIG: hub_ip, exec prefix, env, "
        "commands, resources, node name -> address), beside the sign-in both need"
    )
    return fig
