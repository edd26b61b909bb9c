"""``pai cluster start|stop|status|user add|user remove``: run the embedded local cluster."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from ..cluster import control
from ..cluster.paths import pai_home
from ..common import channel
from .group import PaiGroup

EXIT_UNAVAILABLE = 3


@click.group(cls=PaiGroup)
def cluster() -> None:
    """Run the embedded local cluster (a daemon serving OpenPAI's REST API on a loopback port)."""


@cluster.command()
@click.option("--port", type=int, default=0, show_default=True, help="Loopback port; 0 picks a free one.")
@click.option(
    "--runtime",
    "--backend",
    default="auto",
    show_default=True,
    help="auto uses `backend:` of local/cluster.yaml, else Docker when the engine answers and has or can pull the "
    "examples' images (PAI_JUPYTER_AUTO_IMAGES), else plain processes; start and status say which and why; "
    "or a runtime by name: process, docker, slurm (Slurm's commands find the cluster as they do: SLURM_CONF or "
    "the default slurm.conf), or one a package registers (entry point group pai_jupyter.runtimes).",
)
@click.option("--cpus", type=int, help="CPUs to schedule (default: this machine's).")
@click.option("--memory-mb", type=int, help="Memory to schedule in MB (default: this machine's).")
@click.option("--gpus", type=int, help="GPUs to schedule (default: NVML's count, 0 without NVML).")
@click.option("--min-free-mb", type=int, help="Refuse submits while the home's disk has less free space (default 64).")
@click.option("--smtp", metavar="HOST[:PORT]", help="Mail job notifications through this SMTP server.")
@click.option("--mail-from", metavar="ADDR", help="The sender of notification mails (default pai@localhost).")
@click.option("--notify-webhook", metavar="URL", help="POST job notifications here (jobs may name their own).")
@click.option(
    "--mlflow",
    type=click.Choice(["auto", "on", "off"]),
    help="Make every job an MLflow run on the cluster's own tracking server: auto (the default) where mlflow is "
    "installed (pip install 'pai_jupyter[mlflow]'); on: refuse to start without it.",
)
@click.option("--mlflow-uri", metavar="URL", help="Make jobs runs on this MLflow server of your site's instead.")
@click.option(
    "--mlflow-credentials",
    metavar="FILE",
    help='With --mlflow-uri: a chmod-600 JSON file {"username", "password"} of an admin of that server (users get '
    "accounts pai-<user> there); without it the server is taken to have no authentication.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print nothing when it is already running.")
def start(
    port: int,
    runtime: str,
    cpus: int | None,
    memory_mb: int | None,
    gpus: int | None,
    min_free_mb: int | None,
    smtp: str | None,
    mail_from: str | None,
    notify_webhook: str | None,
    mlflow: str | None,
    mlflow_uri: str | None,
    mlflow_credentials: str | None,
    quiet: bool,
) -> None:
    """Start the daemon in the background; returns once it answers. Job notifications
    (extras.jobStatusChangeNotification) are also configured by ``notification: {smtp, mailFrom, webhook}`` in
    the home's local/cluster.yaml."""
    already = control.running()
    flags = {"--min-free-mb": min_free_mb, "--smtp": smtp, "--mail-from": mail_from, "--notify-webhook": notify_webhook}
    credentials = str(Path(mlflow_credentials).expanduser().resolve()) if mlflow_credentials else None
    flags |= {"--mlflow": mlflow, "--mlflow-uri": mlflow_uri, "--mlflow-credentials": credentials}
    extra = [str(x) for flag, value in flags.items() if value is not None for x in (flag, value)]
    if already is None:
        control.remember_start(None, runtime=runtime, cpus=cpus, memory_mb=memory_mb, gpus=gpus)
    try:
        info = control.start(port=port, runtime=runtime, cpus=cpus, memory_mb=memory_mb, gpus=gpus, extra_args=extra)
    except control.DaemonError as exc:
        click.echo(f"pai cluster: {exc}", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    if already is None or info.get("pid") != already.get("pid"):
        click.echo(f"local cluster started at {info['url']} (runtime {info['runtime']}, pid {info['pid']})")
        if info.get("runtimeChoice"):
            click.echo(f"  runtime {str(info['runtime']).split(' ')[0]}: {info['runtimeChoice']}")
        if info.get("mlflow"):
            click.echo(f"  every job is an MLflow run at {info['mlflow']} (experiment pai/<user>; docs/tracking.md)")
            _wait_for_mlflow(str(info["mlflow"]))
        return
    given = {"--port": port or None, "--runtime": None if runtime == "auto" else runtime, "--cpus": cpus}
    given |= {"--memory-mb": memory_mb, "--gpus": gpus, **flags}
    ignored = [f"{flag} {value}" for flag, value in given.items() if value is not None and not _same(flag, value, info)]
    if quiet and not ignored:
        return
    click.echo(f"local cluster already running at {info['url']} (runtime {info['runtime']}, pid {info['pid']})")
    if ignored:
        click.echo(
            f"ignored {', '.join(ignored)}: a running daemon keeps its settings; to apply them: "
            f"pai cluster stop && pai cluster start {' '.join(ignored)}",
            err=True,
        )


def _wait_for_mlflow(url: str, timeout: float = 180.0) -> None:
    """Wait for the cluster's MLflow server to answer (its first start makes its databases: up to a minute on a
    busy machine), saying so; a submission meanwhile waits for it too, but not this long."""
    import httpx

    deadline, said = time.monotonic() + timeout, False
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                if said:
                    click.echo("  MLflow is up")
                return
        except httpx.HTTPError:
            pass
        if not said:
            click.echo("  waiting for the MLflow server to start (the first time takes up to a minute)...")
            said = True
        time.sleep(0.5)
    click.echo(
        f"  the MLflow server did not answer within {timeout:.0f} s; jobs are submitted without a run until it "
        "does (see local/mlflow-server.log in the cluster's home)",
        err=True,
    )


def _same(flag: str, value: object, info: dict[str, Any]) -> bool:
    """Whether the running daemon already has what ``flag`` asks (its runtime by name, its port)."""
    if flag == "--runtime":
        return str(info.get("runtime", "")).split(" ")[0] == value
    if flag == "--port":
        return str(info.get("url", "")).rsplit(":", 1)[-1] == str(value)
    return False


@cluster.command()
def stop() -> None:
    """Stop the daemon. Running tasks keep running and are picked up again at the next start; until then no
    client (JupyterLab's sidebar, a notebook, ``pai jobs``) starts it on its own."""
    control.remember_stop(None)
    if control.stop():
        click.echo("local cluster stopped (clients do not start it again until: pai cluster start)")
    else:
        click.echo("local cluster was not running")


@cluster.command()
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status(output: str) -> None:
    """Show where the daemon runs, its runtime, capacity and what is in use."""
    info = control.running()
    if info is None:
        click.echo(f"local cluster is not running (home {pai_home()}); start it with: pai cluster start", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    with channel.http_client(info, timeout=5) as http:
        data = http.get("/api/v2/info").json()
    if output == "json":
        click.echo(json.dumps({"url": info["url"], "socket": info.get("socket"), "pid": info["pid"], **data}, indent=2))
        return
    cap, used = data["capacity"], data["used"]
    click.echo(f"local cluster at {info['url']} (pid {info['pid']})")
    if info.get("socket"):
        click.echo(f"  socket:   {info['socket']} (this machine's clients send their tokens there)")
    click.echo(f"  runtime:  {data['runtime']}")
    if info.get("runtimeChoice"):
        click.echo(f"  chosen:   {info['runtimeChoice']}")
    click.echo(f"  capacity: {cap['cpu']} CPU, {cap['memoryMB']} MB memory, {cap['gpu']} GPU")
    differs = "" if str(data["runtime"]).startswith("slurm") else capacity_note(cap)  # (Slurm's: its nodes)
    if differs:
        click.echo(f"  note:     {differs}")
    click.echo(f"  in use:   {used['cpu']} CPU, {used['memoryMB']} MB memory, {used['gpu']} GPU")
    click.echo(f"  virtual clusters: {', '.join(data['virtualClusters'])}")
    click.echo(
        f"  MLflow:   every job is a run at {info['mlflow']} (experiment pai/<user>)"
        if info.get("mlflow")
        else "  MLflow:   off (pai cluster start --mlflow on; pip install 'pai_jupyter[mlflow]')"
    )


def capacity_note(cap: dict[str, int]) -> str:
    """What differs between the scheduled capacity and this machine (started with --cpus/--memory-mb/--gpus,
    e.g. by an older ``make demo``), or ""."""
    from ..cluster.core.scheduler import machine_resources

    machine = machine_resources()
    diffs = [
        f"{cap[key]} {unit} scheduled, the machine has {have}"
        for key, unit, have in (
            ("cpu", "CPU", machine.cpu),
            ("memoryMB", "MB memory", machine.memory_mb),
            ("gpu", "GPU", machine.gpu),
        )
        if cap.get(key) != have
    ]
    if not diffs:
        return ""
    return (
        "capacity differs from this machine (" + "; ".join(diffs) + "): it was started with --cpus, "
        "--memory-mb or --gpus; `pai cluster stop && pai cluster start` schedules what the machine has"
    )


@cluster.group(cls=PaiGroup)
def user() -> None:
    """Manage the local cluster's users."""


@user.command("add")
@click.argument("name")
@click.option(
    "--password",
    is_flag=False,
    flag_value="",
    default=None,
    help="Also set a password for `pai profile login` (asked for when given without a value).",
)
@click.option("--admin", is_flag=True, help="The user sees and controls every job.")
@click.option(
    "--account",
    help="Run the user's tasks as this regular OS account of the host (default: an account of their own, pai-NAME).",
)
@click.option("--email", help="Mail the notifications of the user's jobs to this address.")
def user_add(name: str, password: str | None, admin: bool, account: str | None, email: str | None) -> None:
    """Create user NAME (or give an existing one a new token) and print the token (and, on stderr, the profile
    command for them on this machine: over the daemon's socket)."""
    info = _running()
    if password == "":
        password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    body = {"name": name, "admin": admin, **({"password": password} if password else {})}
    if account is not None:
        body["account"] = account
    if email is not None:
        body["email"] = email
    click.echo(_as_admin(info, "POST", "/api/v2/local/users", body)["token"])
    click.echo(  # (stderr: scripts read the token alone from stdout)
        f"{name}'s profile on this machine, the token in FILE (mode 0600): pai profile add shared {info['url']} "
        f"--username {name} --token-file FILE" + (f" --socket {info['socket']}" if info.get("socket") else ""),
        err=True,
    )


@user.command("remove")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def user_remove(name: str, yes: bool) -> None:
    """Remove user NAME: revoke their tokens, stop their jobs, and remove the OS account made for their tasks.
    Their jobs stay as stopped records and their files as root's."""
    info = _running()
    if not yes:
        click.confirm(f"remove user {name}, revoke their tokens and stop their jobs?", abort=True)
    click.echo(_as_admin(info, "DELETE", f"/api/v2/local/users/{quote(name, safe='')}")["message"])


def _running() -> dict[str, Any]:
    info = control.running()
    if info is None:
        click.echo("local cluster is not running; start it with: pai cluster start", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    return info


def _as_admin(info: dict[str, Any], method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """The daemon's answer to a request with the admin's token (from runtime.json, over the daemon's socket); exits
    with its message on an error."""
    with channel.http_client(info, timeout=120) as http:
        r = http.request(method, path, json=body)
    if r.status_code >= 400:
        click.echo(f"pai cluster: {r.json().get('message', r.text)}", err=True)
        sys.exit(2)
    data: dict[str, Any] = r.json()
    return data
