"""``PAISpawner``: each JupyterHub user's server (and each named server) is a workbench job (docs/hub.md).

``c.JupyterHub.spawner_class = "pai"`` (the ``jupyterhub.spawners`` entry point). The spawn page's form is the one
form definition's (hub/form.py); start() submits the server's job (hub/serverjob.py) to the cluster *as the user*,
with the user's own Hub token, which the cluster takes only because the Hub vouches for it (cluster/http/hubauth.py);
progress() shows the job's place in the queue, why it waits and its start estimate (hub/progress.py); start()
returns the address and port the job's task reports. Stop (also while the job waits: the pending page's Cancel)
stops the job; poll() follows it, so a job that ended by itself (its max run time, GPU-idle release, a failure) is
a stopped server to the Hub; the job's id is the spawner's state, so a restarted Hub finds its servers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any
from urllib.parse import quote

import httpx
from jupyterhub.spawner import Spawner
from traitlets import Bool, Dict, Float, Unicode, default

from ..client import AsyncClient, JobNotFound, PaiError
from ..client.models import JobDetail
from ..client.profiles import HUB, HUB_SOCKET_ENV, HUB_URL_ENV, Profile
from ..common import channel
from ..common.home import pai_home, read_runtime
from ..common.states import FINAL
from . import form
from . import progress as feedback
from .serverjob import PORT, ROLE, job_name, server_job

FORM_KEPT_SECONDS = 120.0  # a refused form's values and problems wait this long for the page that shows them
_refused: dict[str, tuple[float, form.Rendered]] = {}  # Hub user -> the form to show again (see options_form)
_announcing: dict[str, asyncio.Task[None]] = {}  # Hub user -> their removal being told to the cluster


class PAISpawner(Spawner):  # type: ignore[misc]  # (JupyterHub ships no types)
    cluster_url = Unicode(
        "",
        config=True,
        help="The cluster's REST URL as the Hub reaches it. Empty: the embedded cluster of PAI_JUPYTER_HOME (the url "
        "in its local/runtime.json, read at each use: a restarted daemon may listen elsewhere).",
    )
    server_cluster_url = Unicode(
        "",
        config=True,
        help="The cluster's REST URL as a user's server reaches it from its task (on a batch system's node: an "
        "address that node reaches). Empty: the embedded cluster's URL for its runtime's nodes where it announces "
        "one (nodesUrl in local/runtime.json: Slurm's nodes are other hosts), else cluster_url's.",
    )
    service_name = Unicode(
        "pai", config=True, help="The workbench's service on the Hub: users need access:services!service=<name>."
    )
    service_token_file = Unicode(
        "",
        config=True,
        help="The file with the service's API token (0600), which delete_forever shows the cluster to announce a "
        "user's deletion (the cluster offboards them once the Hub no longer has them). Empty: not announced; the "
        "cluster's own reconcile finds them later.",
    )
    server_python = Unicode(
        "",
        config=True,
        help="The Python (on the task's host) with jupyterhub, jupyterlab and pai_jupyter that runs the server. "
        "Empty: the platform's task tools ($PAI_SERVICE_BIN/python3, PAI_JUPYTER_TASK_TOOLS), else python3.",
    )
    form_defaults = Dict(
        config=True,
        help="Defaults of the spawn page's fields: vc, cpu, memory (MB), gpu, image, max_run (minutes).",
    )
    check_interval = Float(0.5, config=True, help="Seconds between two looks at the job while it starts.")

    @default("start_timeout")
    def _start_timeout(self) -> int:
        return 24 * 3600  # a job may wait in the queue for long: the pending page shows why, and Cancel stops it

    @default("poll_interval")
    def _poll_interval(self) -> int:
        return 10  # a job that ended by itself (max run time, GPU-idle release) is a stopped server within 10 s

    @default("http_timeout")
    def _http_timeout(self) -> int:
        return 120

    @default("env_keep")
    def _env_keep(self) -> list[str]:
        return []  # never the Hub's PATH or venv: the task has its own environment

    @default("server_token_scopes")
    def _server_token_scopes(self) -> list[str]:
        # the default "server" role's scopes, and the workbench's: the server acts on the cluster as its user
        return ["users:activity!user", "access:servers!server", f"access:services!service={self.service_name}"]

    @default("options_form")
    def _options_form(self) -> Any:
        return PAISpawner.render_form

    @default("apply_user_options")
    def _apply_user_options(self) -> Any:
        return PAISpawner.check_options

    job = Unicode("", help="The server's job (user~name) while it runs or waits: the spawner's state.")
    started = Bool(False, help="Whether start() returned for that job (state): without, the Hub lost its start.")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._minted: tuple[float, str] | None = None
        self._lost_start = False  # state loaded with a job whose start() never returned (the Hub died meanwhile)

    # ---- the cluster, as this user -------------------------------------------------------------------------------
    def base_url(self) -> str:
        if self.cluster_url:
            return str(self.cluster_url).rstrip("/")
        info = read_runtime(pai_home()) or {}
        if not info.get("url"):
            raise RuntimeError(f"the embedded cluster of {pai_home()} is not running (pai cluster start)")
        return str(info["url"])

    def server_url(self) -> str:
        """The cluster's REST URL as the user's server reaches it from its task: ``server_cluster_url``; else, for
        the embedded cluster, the address its daemon listens at for its runtime's nodes (``nodesUrl``: this host's
        address on the route to them, daemon.listen_for_nodes); else ``base_url()``. Read at each start."""
        if self.server_cluster_url:
            return str(self.server_cluster_url).rstrip("/")
        if not self.cluster_url:
            nodes_url = (read_runtime(pai_home()) or {}).get("nodesUrl")
            if nodes_url:
                return str(nodes_url).rstrip("/")
        return self.base_url()

    def token(self) -> str:
        """The user's Hub token for the cluster: the server's own while this Hub started it, else one minted for an
        hour (after a Hub restart, and for the form before any server exists)."""
        if self.api_token:
            return str(self.api_token)
        if self._minted is None or self._minted[0] < time.monotonic():
            scopes = [f"access:services!service={self.service_name}"]
            minted = self.user.new_api_token(note="PAISpawner: the cluster's calls", scopes=scopes, expires_in=3600)
            self._minted = (time.monotonic() + 3000, minted)
        return self._minted[1]

    def local_socket(self) -> str | None:
        """The embedded cluster's unix socket (None for a cluster_url): the Hub's calls with people's tokens, and
        those of their servers on this machine, go there rather than over loopback TCP (common/channel.py)."""
        return None if self.cluster_url else channel.announced(read_runtime(pai_home()) or {})

    def client(self) -> AsyncClient:
        where = Profile(name="(hub)", url=self.base_url(), username=self.user.name, socket=self.local_socket())
        return AsyncClient(where, token=self.token(), auto_start=False)

    # ---- the spawn page ------------------------------------------------------------------------------------------
    async def render_form(self) -> str:
        """The form, with the virtual clusters this user may use; after a refused submission, its values and each
        problem beside its field (JupyterHub renders a refused form from the default server's spawner, so what to
        show is kept by user)."""
        refused = _refused.pop(self.user.name, None)
        shown = (
            refused[1]
            if refused and refused[0] > time.monotonic()
            else form.Rendered({**form.DEFAULTS, **self.form_defaults, **self._last_choice()}, {})
        )
        vcs: list[str] | None = None
        why = ""
        try:
            async with self.client() as pai:
                vcs = await pai.virtual_clusters()
        except (PaiError, RuntimeError) as exc:
            why = str(exc)
        return form.render(vcs, why, shown)

    def _last_choice(self) -> dict[str, Any]:
        last = dict(self.user_options or {})
        keys = {"vc": "vc", "cpu": "cpu", "memoryMB": "memory", "gpu": "gpu", "image": "image"}
        out = {k: last[o] for o, k in keys.items() if o in last}
        if "maxRunTimeMinutes" in last:
            out["max_run"] = last["maxRunTimeMinutes"] or 0
        return out

    def options_from_form(self, formdata: dict[str, list[str]]) -> dict[str, Any]:
        try:
            return form.options(formdata)
        except form.FormError as exc:
            _refused[self.user.name] = (time.monotonic() + FORM_KEPT_SECONDS, form.Rendered(exc.values, exc.problems))
            raise

    def check_options(self, user_options: dict[str, Any]) -> None:
        """JupyterHub's hook for the user options of a start (from the form, or the REST API, which skips it): the
        job's rules, before anything is submitted; a problem is the API's 400."""
        form.server_options(user_options or {}, self.form_defaults)

    # ---- the job -------------------------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state()
        if self.job:
            state["job"] = self.job
            state["started"] = self.started
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.job = state.get("job", "")
        self.started = bool(state.get("started", True))  # (a state saved before "started" existed: a started one)
        self._lost_start = bool(self.job) and not self.started

    def clear_state(self) -> None:
        super().clear_state()
        self.job = ""
        self.started = False
        self._lost_start = False

    def _save_state(self) -> None:
        """Write the state to the Hub's database now: the Hub itself does so only once start() returns, and a Hub
        that dies before would leave the job running unknown to it (JupyterHub commits what start() changed)."""
        if self.orm_spawner is not None:
            self.orm_spawner.state = self.get_state()
            self.db.commit()

    def server_env(self) -> dict[str, str]:
        """The server's environment: the Hub's (its token, OAuth client, URLs), and the ``hub`` profile the
        extension, the magics and ``pai`` in its terminals use (client/profiles.py)."""
        env = {k: str(v) for k, v in self.get_env().items()}
        env.pop("JUPYTERHUB_SERVICE_URL", None)  # its address is the task's: the job's command sets it
        env[HUB_URL_ENV] = self.server_url()
        env["PAI_PROFILE"] = HUB
        socket = self.server_socket()
        if socket:
            env[HUB_SOCKET_ENV] = socket
        return env

    def server_socket(self) -> str | None:
        """The daemon's unix socket for a server that runs on its machine (the embedded cluster's process runtime;
        not in a container, not on a batch system's node): found there by that stable name, a daemon restarted on
        another port keeps serving it, and its Hub token never crosses loopback TCP."""
        if self.server_cluster_url or self.cluster_url:
            return None
        info = read_runtime(pai_home()) or {}
        return channel.announced(info) if str(info.get("runtime", "")).startswith("process") else None

    async def start(self) -> tuple[str, int]:
        opts = form.server_options(self.user_options or {}, self.form_defaults)
        job = server_job(
            job_name(self.name),
            opts,
            self.server_env(),
            user=self.user.name,
            server_name=self.name,
            python=self.server_python or None,
        )
        async with self.client() as pai:
            self.job = await pai.submit(job)
            self.log.info("%s: job %s submitted", self._log_name, self.job)
            try:
                self._save_state()
                where = await self._until_answering(pai)
                self.started = True
                return where
            except BaseException:  # cancelled (the pending page's Stop), failed, timed out: no job is left behind
                await asyncio.shield(self._stop_job())
                raise

    async def _until_answering(self, pai: AsyncClient) -> tuple[str, int]:
        """Wait for the job's task to run and its server to accept connections; its (address, port)."""
        while True:
            detail = await pai.detail(self.job)
            if detail.is_final:
                raise RuntimeError(await self._ended(pai, detail))
            where = address(detail)
            if where is not None and await answers(*where):
                return where
            await asyncio.sleep(self.check_interval)

    async def _ended(self, pai: AsyncClient, detail: JobDetail) -> str:
        status = detail.job_status
        text = f"the server's job {self.job} ended {status.state}"
        if status.app_exit_diagnostics:
            text += f": {status.app_exit_diagnostics.strip()[:500]}"
        with contextlib.suppress(PaiError):
            lines = (await pai.logs(self.job, role=ROLE, index=0, stream="all", tail=True)).strip().splitlines()
            if lines:
                text += " — its last lines: " + " | ".join(lines[-5:])[:1000]
        return text

    async def _stop_job(self) -> None:
        if not self.job:
            return
        with contextlib.suppress(Exception):
            async with self.client() as pai:
                await pai.stop(self.job)

    async def poll(self) -> int | None:
        if not self.job:
            return 0
        try:
            async with self.client() as pai:
                detail = await pai.detail(self.job)
        except JobNotFound:
            return 0
        except (PaiError, RuntimeError) as exc:  # the cluster does not answer now: the server may well run
            self.log.warning("%s: job %s not checked: %s", self._log_name, self.job, exc)
            return None
        if detail.state in FINAL:
            return int(detail.exit_code) if detail.exit_code else (0 if detail.state == "SUCCEEDED" else 1)
        if self._lost_start:
            return await self._lost(detail)
        return None

    # ---- a start the Hub lost --------------------------------------------------------------------------------------
    async def _lost(self, detail: JobDetail) -> int:
        """The restarted Hub checks a server whose start() it never saw return (it died meanwhile; the job was in
        the state saved at its submit): nobody waits for it any more, and its server cannot be taken up (the Hub
        never routed it, and jupyterhub-singleuser gives up on a Hub that does not answer within about 30 s), so
        the job is stopped and the person starts again. (While the Hub starts, the cluster cannot check its
        tokens: the Hub's own check of the server's URL then fails, and it stops the server the same way.)"""
        self._lost_start = False
        self.log.warning("%s: job %s of a start the Hub lost is stopped (%s)", self._log_name, self.job, detail.state)
        await self._stop_job()
        return 1

    async def stop(self, now: bool = False) -> None:
        """Stop the job and wait (up to a minute) until it ended."""
        if not self.job:
            return
        await self._stop_job()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and await self.poll() is None:
            await asyncio.sleep(self.check_interval)

    async def progress(self) -> Any:
        """The job's place, why it waits and its start estimate, live, until it runs; then the server's start."""
        last = None
        async with self.client() as pai:
            while True:
                event = await self._progress_event(pai)
                if event is not None and event != last:
                    last = event
                    yield event.to_dict()
                await asyncio.sleep(1.0)

    async def _progress_event(self, pai: AsyncClient) -> feedback.Event | None:
        job = self.job
        if not job:
            return None
        try:
            detail = await pai.detail(job)
            if detail.state == "WAITING":
                queued = feedback.find_queued(await pai.waiting_queue(), job)
                return feedback.waiting(job, queued, detail.job_status.waiting_reason)
        except PaiError as exc:
            return feedback.Event(feedback.SUBMITTED, f"The cluster does not answer about job {job}: {exc}")
        where = address(detail)
        if detail.state == "RUNNING" and where is not None:
            if await answers(*where):
                return feedback.answering(f"{where[0]}:{where[1]}")
            return feedback.running(where[0])
        return feedback.submitted(job, detail.job_status.virtual_cluster or "default")

    async def delete_forever(self) -> None:
        """The Hub deletes this user (or this named server): once the Hub no longer has the user (it deletes them
        after this call), tell the cluster, which offboards them only when the Hub itself says 404 (the service
        token alone decides nothing). In the background: the Hub's deletion does not wait for it."""
        name = self.user.name
        if self.service_token_file and name not in _announcing:  # (once for a user of several servers)
            _announcing[name] = asyncio.ensure_future(self._announce_when_gone(name))
            _announcing[name].add_done_callback(lambda _: _announcing.pop(name, None))

    async def _announce_when_gone(self, name: str) -> None:
        from jupyterhub import orm

        deadline = time.monotonic() + 60
        while self.db.query(orm.User).filter_by(name=name).first() is not None:
            if time.monotonic() > deadline:
                return  # the user stays (a named server was deleted, or the deletion failed)
            await asyncio.sleep(0.5)
        try:
            with open(self.service_token_file) as f:
                token = f.read().strip()
            socket = self.local_socket()
            over = channel.async_transport(socket) if socket else None
            async with httpx.AsyncClient(timeout=120, transport=over, trust_env=over is None) as http:
                r = await http.delete(
                    f"{self.base_url()}/api/v2/local/hub/users/{quote(name, safe='')}",
                    headers={"Authorization": f"token {token}"},
                )
            self.log.info("the cluster answered %s to the removal of %s: %s", r.status_code, name, r.text[:300])
        except (OSError, httpx.HTTPError, RuntimeError) as exc:
            self.log.warning("the cluster was not told of the removal of %s (its reconcile will be): %s", name, exc)


def address(detail: JobDetail) -> tuple[str, int] | None:
    """The running server task's (address, port) from the job's detail, once both are known."""
    tasks = detail.role_tasks(ROLE)
    if not tasks or detail.state != "RUNNING" or not tasks[0].container_ip:
        return None
    value = (tasks[0].container_ports or {}).get(PORT)
    first = value[0] if isinstance(value, list) and value else value
    if first in (None, ""):
        return None
    return tasks[0].container_ip, int(str(first).split(",")[0])


async def answers(host: str, port: int) -> bool:
    """Does something accept connections there (the server is up)?"""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=2)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
