"""IPython magics: ``%%pai_submit`` and the ``%pai_*`` line magics, thin layers over the one client.

Loading them must stay cheap (``%load_ext pai_jupyter`` in <= 0.5 s), so this module imports only IPython's
magic machinery at the top; the client, protocol, pandas and widgets are imported when a magic first runs.
Errors a user can act on (a bad job, an unknown job, no server) are shown as output, never as a traceback.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from . import display as ui
from .cellinput import CellInputError, deferred_interrupt, interpolate, parse_params
from .magicsupport import errors_as_output, split_args

if TYPE_CHECKING:
    from ..client import Client


@magics_class
class PaiMagics(Magics):
    """``%%pai_submit`` and ``%pai_jobs|status|logs|stop|clone|tensorboard|monitor|profile``."""

    def __init__(self, shell: Any = None) -> None:
        super().__init__(shell)
        self.profile: str | None = None  # this session's profile (%pai_profile NAME); None = the default one
        self.last_job: str | None = None
        self.last_failure: str | None = None  # why the last %%pai_submit submitted nothing
        self._clients: dict[str | None, Client] = {}

    def client(self, profile: str | None = None) -> Client:
        from ..client import Client

        key = profile or self.profile
        if key not in self._clients:
            self._clients[key] = Client(key)
        return self._clients[key]

    def close(self) -> None:
        for c in self._clients.values():
            with contextlib.suppress(Exception):
                c.close()
        self._clients.clear()

    def _job(self, job: str | None) -> str:
        if job:
            return job
        if self.last_failure is not None:
            raise CellInputError(
                f"the last %%pai_submit submitted no job ({self.last_failure}); fix that cell and run it again, "
                "or name a job"
            )
        if self.last_job is None:
            raise CellInputError("name a job (no job was submitted from this notebook yet)")
        return self.last_job

    def _namespace(self) -> dict[str, Any]:
        """The notebook's variables (the magics are registered on an IPython shell)."""
        if self.shell is None:
            raise RuntimeError("the PAI magics run inside an IPython shell")
        return self.shell.user_ns

    def _store(self, var: str | None, value: Any) -> None:
        if var:
            self._namespace()[var] = value

    # ---- submit and watch ---------------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--profile", "-p", help="cluster profile (default: %%pai_profile's, else the default one)")
    @argument("--wait", "-w", action="store_true", help="show a live status line until the job ends")
    @argument("--follow", "-f", action="store_true", help="stream the first task's log into the cell (waits)")
    @argument("--name", "-n", help="submit under this job name instead of the cell's")
    @argument("--param", action="append", default=[], metavar="KEY=VALUE", help="set a parameter (v1: jobEnv)")
    @argument("-o", "--out", dest="var", help="store the job (a JobDetail) in this notebook variable")
    @argument("--timeout", type=float, help="stop waiting (not the job) after this many seconds")
    @argument("--stop-on-interrupt", action="store_true", help="interrupting the cell stops the job")
    @argument("--raw", action="store_true", help="no {name} interpolation of the cell")
    @argument(
        "--notify",
        nargs="?",
        const="succeeded,failed,stopped",
        metavar="CHANGES",
        help="be told (the cluster mails you) when the job changes: any of running,succeeded,failed,stopped,retried "
        "(default: succeeded,failed,stopped); sets extras.jobStatusChangeNotification",
    )
    @cell_magic
    @errors_as_output
    def pai_submit(self, line: str, cell: str) -> None:
        """Submit the cell: a job as OpenPAI v2 YAML or v1 JSON.

        ``{name}`` / ``{obj.attr}`` in the cell become notebook variables (True/False/None as true/false/null);
        ``{{name}}`` writes a literal ``{name}``. Braces around anything but a name (JSON objects, YAML flow
        mappings) and shell ``${VAR}`` are left alone; ``--raw`` turns interpolation off.
        """
        args = split_args(self.pai_submit, line)
        text = cell if args.raw else interpolate(cell, self._namespace())
        params = parse_params(args.param)
        if args.notify is not None:
            from ..protocol.edit import with_notification

            try:
                text = with_notification(text, [c.strip().lower() for c in args.notify.split(",") if c.strip()])
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        client = self.client(args.profile)
        with deferred_interrupt() as held:
            try:
                from pathlib import Path

                from ..common.origin import gather, kernel_notebook

                source = shown_cell(f"%%pai_submit {line}", cell, text)
                origin = gather("magic", notebook=kernel_notebook(), cell=source, code=Path.cwd())
                job_id = client.submit(text, name=args.name, params=params or None, origin=origin)
            except Exception as exc:
                self.last_failure = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise
        self.last_job, self.last_failure = job_id, None
        from ..protocol.containerpaths import submit_notes

        for path, message in submit_notes(client, text):
            ui.show(
                f"note: {path}: {message}",
                f"<div style='color:#8a6d00'>note: <code>{ui.esc(path)}</code>: {ui.esc(message)}</div>",
            )
        if not (args.wait or args.follow or held["hit"]):
            ui.show(ui.submitted_text(job_id), ui.submitted_html(job_id, client))
            self._store(args.var, client.detail(job_id))
            return
        self._store(args.var, self._watch(client, job_id, args, interrupted=held["hit"]))

    def _watch(self, client: Client, job_id: str, args: Any, interrupted: bool = False) -> Any:
        """Status line (and log) until the job ends; an interrupt leaves the job running unless told to stop it."""
        from ..client import WaitTimeout

        status, start = ui.StatusLine(), time.monotonic()
        detail = None

        def seen(d: Any) -> None:
            nonlocal detail
            detail = d
            status.job(d, time.monotonic() - start)

        try:
            if interrupted:
                raise KeyboardInterrupt
            seen(client.detail(job_id))
            if getattr(args, "follow", False):
                for chunk in client.follow(job_id):
                    sys.stdout.write(chunk)
                    sys.stdout.flush()
            seen(client.wait(job_id, timeout=args.timeout, on_update=seen))
        except KeyboardInterrupt:
            if getattr(args, "stop_on_interrupt", False):
                client.stop(job_id)
                msg = f"interrupted: stopping {job_id}"
            else:
                msg = f"interrupted: {job_id} was submitted and keeps running; stop it with %pai_stop {job_id}"
            ui.show(msg, ui.error_html(msg))
        except WaitTimeout:
            state = detail.state if detail is not None else "not finished"
            msg = f"{job_id} is still {state} after {args.timeout:g} s; it keeps running"
            ui.show(msg, ui.error_html(msg))
        return detail

    # ---- line magics ------------------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--state", "-s", help="only jobs in this state (WAITING, RUNNING, SUCCEEDED, FAILED, STOPPED)")
    @argument("--all", dest="all_users", action="store_true", help="every user's jobs (admins)")
    @argument("--limit", "-n", type=int, default=50, help="at most this many, newest first (default 50)")
    @argument("--live", action="store_true", help="an auto-refreshing JobList widget instead of a table")
    @argument("--profile", "-p")
    @line_magic
    @errors_as_output
    def pai_jobs(self, line: str) -> Any:
        """Your jobs, newest first, as a DataFrame (``df = %pai_jobs``)."""
        args = split_args(self.pai_jobs, line)
        if args.live:
            from .joblist import JobList

            return JobList(
                client=self.client(args.profile),
                states=[args.state.upper()] if args.state else None,
                all_users=args.all_users,
                limit=args.limit,
            )
        rows = self.client(args.profile).list_jobs(state=args.state, all_users=args.all_users, limit=args.limit)
        return ui.jobs_frame(rows)

    @magic_arguments()
    @argument("job", nargs="?", help="user~name or a name (default: the last job submitted here)")
    @argument("--config", "-c", action="store_true", help="also show the submitted config (secrets masked)")
    @argument("--profile", "-p")
    @line_magic
    @errors_as_output
    def pai_status(self, line: str) -> None:
        """A job's state, why it waits or how it ended, and its tasks; ``--config`` adds its submitted config."""
        args = split_args(self.pai_status, line)
        client = self.client(args.profile)
        d = client.detail(self._job(args.job))
        ui.show(ui.detail_text(d), ui.detail_html(d))
        if args.config:
            text = client.config(d.id)
            ui.show(text, ui.config_html(d.id, text))

    @magic_arguments()
    @argument("job", nargs="?")
    @argument("--role", "-r", help="task role (default: the first)")
    @argument("--index", "-i", type=int, default=0, help="task index in the role")
    @argument("--stream", choices=["all", "stdout", "stderr"], default="all")
    @argument("--follow", "-f", action="store_true", help="keep printing as the task writes, until it ends")
    @argument("--tail", action="store_true", help="only the last 16 KiB")
    @argument("--profile", "-p")
    @line_magic
    @errors_as_output
    def pai_logs(self, line: str) -> None:
        """A task's log as plain text; ``-f`` follows it."""
        args = split_args(self.pai_logs, line)
        client, job = self.client(args.profile), self._job(args.job)
        if not args.follow:
            sys.stdout.write(client.logs(job, role=args.role, index=args.index, stream=args.stream, tail=args.tail))
            return
        try:
            for chunk in client.follow(job, role=args.role, index=args.index, stream=args.stream):
                sys.stdout.write(chunk)
                sys.stdout.flush()
        except KeyboardInterrupt:
            ui.show(f"stopped following; {client.job_id(job)} keeps running")

    @magic_arguments()
    @argument("job", nargs="?")
    @argument("--profile", "-p")
    @line_magic
    @errors_as_output
    def pai_stop(self, line: str) -> None:
        args = split_args(self.pai_stop, line)
        ui.show(f"stopping {self.client(args.profile).stop(self._job(args.job))}")

    @magic_arguments()
    @argument("job", nargs="?")
    @argument("--name", "-n", help="name of the copy (default: the name with a random suffix)")
    @argument("--wait", "-w", action="store_true")
    @argument("--timeout", type=float)
    @argument("--stop-on-interrupt", action="store_true")
    @argument("-o", "--out", dest="var")
    @argument("--profile", "-p")
    @line_magic
    @errors_as_output
    def pai_clone(self, line: str) -> None:
        """Submit a job's exact config again under a new name."""
        args = split_args(self.pai_clone, line)
        client = self.client(args.profile)
        with deferred_interrupt() as held:
            new = client.clone(self._job(args.job), name=args.name)
        self.last_job = new
        if args.wait or held["hit"]:
            self._store(args.var, self._watch(client, new, args, interrupted=held["hit"]))
        else:
            ui.show(ui.submitted_text(new), ui.submitted_html(new, client))
            self._store(args.var, client.detail(new))

    @magic_arguments()
    @argument("job", nargs="?")
    @argument(
        "--logdir",
        help="a local log directory: start (or reuse) a TensorBoard for it; one started here "
        "stops when this kernel shuts down",
    )
    @argument("--role", "-r")
    @argument("--index", "-i", type=int)
    @argument("--height", type=int, default=600)
    @argument(
        "--wait-events",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="while the job runs, wait up to this long for its first event file, so the cell does not keep a "
        "'no event file yet' note for a job that writes one a moment later (0: do not wait)",
    )
    @argument("--profile", "-p")
    @line_magic
    @errors_as_output
    def pai_tensorboard(self, line: str) -> Any:
        """Embed a job's TensorBoard (through the Jupyter server's proxy), or one for a local logdir."""
        from . import tensorboard

        args = split_args(self.pai_tensorboard, line)
        if args.logdir:
            return tensorboard.local(args.logdir, tied=True).embed(height=args.height)  # ends with the kernel
        return tensorboard.for_job(
            self.client(args.profile),
            self._job(args.job),
            role=args.role,
            index=args.index,
            height=args.height,
            wait_events=args.wait_events,
        )

    @magic_arguments()
    @argument("job", nargs="?")
    @argument("--interval", type=float, default=2.0, help="seconds between samples")
    @argument("--profile", "-p")
    @line_magic
    @errors_as_output
    def pai_monitor(self, line: str) -> Any:
        """Live CPU / memory (and GPU, with NVML) charts of a job's tasks."""
        from .monitor import ResourceMonitor

        args = split_args(self.pai_monitor, line)
        return ResourceMonitor(self._job(args.job), client=self.client(args.profile), interval=args.interval)

    @magic_arguments()
    @argument("name", nargs="?", help="use this profile for the magics in this session")
    @line_magic
    @errors_as_output
    def pai_profile(self, line: str) -> None:
        """The cluster profiles; with NAME, the magics use that one from now on (clusters.yaml is not changed)."""
        from ..client import get_profile, load_profiles

        args = split_args(self.pai_profile, line)
        if args.name:
            self.profile = get_profile(args.name).name
        current = self.profile or get_profile().name
        rows = [p.public() for p in load_profiles()]
        for r in rows:
            r["in use"] = "*" if r["name"] == current else ""
        cols = ["in use", "name", "url", "username", "token", "default"]
        text = "\n".join(" ".join(str(r[c]) for c in cols) for r in rows)
        ui.show(
            f"magics use profile {current!r}\n{text}",
            f"<p>magics use profile <code>{ui.esc(current)}</code></p>"
            + ui.table_html(cols, [[r[c] for c in cols] for r in rows]),
        )


def load_ipython_extension(ipython: Any) -> None:
    from .sweepmagic import SweepMagics  # %%pai_sweep (pai_jupyter.sweep loads when it runs)

    ipython.register_magics(PaiMagics)
    ipython.register_magics(SweepMagics)


def unload_ipython_extension(ipython: Any) -> None:
    ipython.magics_manager.registry.pop("SweepMagics", None)
    magics = ipython.magics_manager.registry.pop("PaiMagics", None)
    if magics is not None:
        magics.close()
        for kind in ("line", "cell"):
            for name in [n for n in ipython.magics_manager.magics[kind] if n.startswith("pai_")]:
                ipython.magics_manager.magics[kind].pop(name)


def shown_cell(magic: str, cell: str, submitted: str) -> str | None:
    """The cell as its job's MLflow run shows it (``pai.cell``): its own text (``{name}`` placeholders rather than the
    notebook's values), a ``secrets`` section masked as the job's config view masks it; the submitted text, masked,
    where the cell itself is not a job document; None where neither is."""
    from ..protocol.parse import load_document
    from ..protocol.render import masked_text

    for text in (cell, submitted):
        try:
            return f"{magic}\n{masked_text(text, load_document(text))}"
        except Exception:  # (not a mapping, not YAML/JSON)
            continue
    return None
