"""Embedded TensorBoard: a job's, through the Jupyter server's proxy route, or one for a local logdir.

A job's TensorBoard runs inside its task (the ``tensorboard`` runtime plugin); the notebook embeds the server
extension's route ``{base_url}pai/jobs/{user}~{name}/{role}/{index}/tensorboard/``, never ``localhost:port``
(which breaks on remote servers and hubs). A local logdir gets a TensorBoard subprocess, reused by logdir like
``%tensorboard`` does (an info file per logdir under ``$PAI_JUPYTER_HOME/tensorboard``; one that
``%pai_tensorboard --logdir`` starts ends with its kernel), reached through
jupyter-server-proxy's ``{base_url}proxy/{port}/`` or ``$TENSORBOARD_PROXY_URL`` (``%PORT%`` is replaced).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.home import pai_home
from ..common.localserver import die_with_parent, free_port, serves
from ..common.routes import service_tasks
from ..common.states import FINAL, TaskState
from .display import base_url, esc, link_html, service_url

if TYPE_CHECKING:
    from ..client import Client
    from ..client.models import TaskService


def iframe(url: str, height: int = 600, title: str = "TensorBoard", note: str = "") -> Any:
    """The page in an iframe, a link to open it in a tab, and ``note`` (HTML) between them."""
    from IPython.display import HTML

    return HTML(
        f"<div>{link_html(url, f'open {title} in a new tab')}</div>{note}"
        f'<iframe src="{esc(url)}" width="100%" height="{int(height)}" frameborder="0"></iframe>'
    )


NO_EVENTS = (
    'No event file there yet, so TensorBoard shows "No dashboards are active" until the program writes '
    'summaries into that directory (e.g. SummaryWriter(os.environ["PAI_OUTPUT_LOGS"]) or '
    "tf.summary.create_file_writer(...)); it looks again every 5 s."
)


def has_runs(url: str, timeout: float = 2.0, token: str | None = None) -> bool | None:
    """Does the TensorBoard at ``url`` see any event file (``data/runs``)? None when it does not answer. A task's
    TensorBoard wants its service token (the services list gives it to the job's owner)."""
    import httpx

    headers = {"Authorization": f"token {token}"} if token else None
    try:
        r = httpx.get(url.rstrip("/") + "/data/runs", timeout=timeout, headers=headers)
        r.raise_for_status()
        return bool(r.json())
    except (httpx.HTTPError, ValueError):
        return None


def local_events(logdir: str | None) -> bool | None:
    """Is there an event file under ``logdir`` on this machine? None when it is no directory here (a path
    inside a container, a remote cluster)."""
    if not logdir or not Path(logdir).is_dir():
        return None
    return next(Path(logdir).rglob("*tfevents*"), None) is not None


def logdir_note(logdir: str | None, runs: bool | None) -> str:
    """Where TensorBoard looks, and a hint while it has found no event file (HTML)."""
    where = f"TensorBoard watches <code>{esc(logdir)}</code>. " if logdir else ""
    if runs is False:
        return f"<div style='color:#6e7781'>{where}{esc(NO_EVENTS)}</div>"
    return f"<div style='color:#6e7781'>{where}</div>" if where else ""


def _note(text: str) -> Any:
    from IPython.display import HTML

    return HTML(f"<i>{esc(text)}</i>")


def job_services(client: Client, job: Any) -> list[TaskService]:
    """The job's TensorBoard services (role, index, state, and host, port, logdir where the server says): from
    ``client.services`` where the server has it, else from the job's own ``tensorboard`` plugin (the tasks the
    daemon would run it in: ``service_tasks``; state unknown ""; port unknown 0; logdir the plugin's, else
    ``$PAI_OUTPUT_LOGS``)."""
    from ..client.models import TaskService

    if hasattr(client, "services"):
        try:
            return [s for s in client.services(job) if s.name == "tensorboard"]
        except Exception as exc:
            if type(exc).__name__ != "NotSupported":
                raise
    from ..protocol.load import job_from_served_config

    spec = job_from_served_config(client.config(job))
    plugin = next((p for p in spec.runtime_plugins if p.get("plugin") == "tensorboard"), None)
    if plugin is None:
        return []
    params = plugin.get("parameters") or {}
    logdir = params.get("logdir")
    where = str(logdir) if isinstance(logdir, str) and logdir else "$PAI_OUTPUT_LOGS"
    return [
        TaskService(role=role, index=index, name="tensorboard", port=0, state="", logdir=where)
        for role, index in service_tasks(params, [(r.name, r.instances) for r in spec.task_roles])
    ]


def job_targets(client: Client, job: Any) -> list[tuple[str, int, str]]:
    """(role, index, service state) of each task that runs the job's TensorBoard."""
    return [(s.role, s.index, s.state) for s in job_services(client, job)]


def for_job(
    client: Client,
    job: Any,
    *,
    role: str | None = None,
    index: int | None = None,
    height: int = 600,
    base: str | None = None,
    wait_events: float = 0.0,
) -> Any:
    """An iframe of the job's TensorBoard through the server extension, or a note saying why there is none.

    It is embedded while its task waits or runs (the proxy answers once the task is up); not once the task has
    ended, nor when the service was stopped in a running task. ``wait_events``: seconds to wait for the first
    event file before saying there is none (the note stays in the cell's output, so it should not be stale)."""
    job_id = client.job_id(job)
    detail = client.detail(job_id)  # before the services: a service listed later never predates the task state
    targets = [
        s
        for s in job_services(client, job_id)
        if (role is None or s.role == role) and (index is None or s.index == index)
    ]
    if not targets:
        return _note(
            f"{job_id} runs no TensorBoard: add the tensorboard runtime plugin to the job "
            "(extras: com.microsoft.pai.runtimeplugin)"
        )
    found = targets[0]
    r, i, service = found.role, found.index, found.state
    task = next((t.task_state for t in detail.tasks if t.role == r and t.task_index == i), detail.state)
    if task in FINAL or detail.state in FINAL:
        return _note(
            f"the TensorBoard of {job_id} ({r}[{i}]) ended with its task ({task}); plot the event "
            "files with pai_jupyter.notebook.curves instead"
        )
    if task == TaskState.RUNNING and service in ("stopped", "stopping"):
        return _note(
            f"the TensorBoard of {job_id} ({r}[{i}]) was stopped; start it again with "
            f"client.service_action({job_id!r}, {r!r}, {i}, 'tensorboard', 'start')"
        )
    runs = _runs(found)
    deadline = time.monotonic() + wait_events
    while runs is not True and time.monotonic() < deadline:
        time.sleep(0.5)
        runs = _runs(found)
    return iframe(service_url(job_id, r, i, "tensorboard", base), height, note=logdir_note(found.logdir, runs))


def _runs(found: TaskService) -> bool | None:
    """Does the task's TensorBoard (or, on the process runtime, its logdir on this machine) have an event file?"""
    if local_events(found.logdir):
        return True
    if not found.port:
        return local_events(found.logdir)
    runs = has_runs(f"http://{found.host}:{found.port}/", token=found.token)
    return local_events(found.logdir) if runs is None else runs


# ---- a TensorBoard for a local logdir ------------------------------------------------------------------------
def info_dir() -> Path:
    """``$PAI_JUPYTER_HOME/tensorboard`` (the home the client's profiles live in)."""
    return pai_home() / "tensorboard"


def proxy_url(port: int, base: str | None = None) -> str:
    template = os.environ.get("TENSORBOARD_PROXY_URL")
    if template:
        return template.replace("%PORT%", str(port))
    return f"{base or base_url()}proxy/{port}/"


@dataclass
class LocalTensorBoard:
    logdir: str
    port: int
    pid: int
    reused: bool = False

    @property
    def url(self) -> str:
        return proxy_url(self.port)

    def alive(self) -> bool:
        """Our TensorBoard still runs there: the pid is a tensorboard for this logdir, and it listens on the port."""
        import psutil

        try:
            cmd = " ".join(psutil.Process(self.pid).cmdline())
        except (psutil.Error, OSError):
            return False
        return "tensorboard" in cmd and self.logdir in cmd and serves(self.pid, self.port)

    def embed(self, height: int = 600) -> Any:
        return iframe(self.url, height, note=logdir_note(self.logdir, has_runs(f"http://127.0.0.1:{self.port}/")))

    def _repr_html_(self) -> str:
        return self.embed()._repr_html_()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGTERM)
        with contextlib.suppress(OSError):
            _info_file(self.logdir).unlink()


def _info_file(logdir: str) -> Path:
    return info_dir() / f"{hashlib.sha1(logdir.encode()).hexdigest()[:16]}.json"


def local(
    logdir: str | os.PathLike[str], *, port: int | None = None, timeout: float = 60.0, tied: bool = False
) -> LocalTensorBoard:
    """Start a TensorBoard for ``logdir``, or reuse the one already serving it. ``tied``: the TensorBoard this
    call starts ends with this process (``%pai_tensorboard --logdir``: with the kernel, whether it shuts down
    or is killed), so none outlives the notebook that asked for it."""
    path = str(Path(logdir).expanduser().resolve())
    info = _info_file(path)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        known = json.loads(info.read_text())
        tb = LocalTensorBoard(path, int(known["port"]), int(known["pid"]), reused=True)
        if tb.alive():
            return tb
    Path(path).mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    info.parent.mkdir(parents=True, exist_ok=True)
    log = info.with_suffix(".log")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tensorboard.main",
                "--logdir",
                path,
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--reload_interval",
                "5",
            ],
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent if tied and sys.platform == "linux" else None,
        )
    deadline = time.monotonic() + timeout
    while not serves(proc.pid, port):  # (not answers(): another process may have taken the port meanwhile)
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"TensorBoard exited with {proc.returncode} before serving {path}:\n{tail}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise TimeoutError(f"TensorBoard did not answer on port {port} within {timeout:g} s (log: {log})")
        time.sleep(0.1)
    info.write_text(json.dumps({"logdir": path, "port": port, "pid": proc.pid}))
    tb = LocalTensorBoard(path, port, proc.pid)
    if tied:  # a clean shutdown also removes the info file
        import atexit

        atexit.register(tb.stop)
    return tb
