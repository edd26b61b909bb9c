"""``pai submit|jobs|status|logs|stop|clone|delete``: jobs on any profile, through the one client."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..client import Client, JobDetail
from ..common.format import duration
from ..common.origin import gather
from ..common.states import JobState
from .common import (
    EXIT_BAD_INPUT,
    EXIT_JOB_FAILED,
    StatusLine,
    client_for,
    handle_errors,
    output_option,
    profile_option,
    table,
)


def _params(values: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            click.echo(f"pai: --param wants KEY=VALUE, got {item!r}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        try:
            out[key] = json.loads(value)  # numbers and booleans keep their type
        except ValueError:
            out[key] = value
    return out


def _wait(client: Client, job_id: str) -> JobDetail:
    line = StatusLine()
    start = time.monotonic()

    def show(d: JobDetail) -> None:
        why = f" ({d.job_status.waiting_reason})" if d.state == JobState.WAITING and d.job_status.waiting_reason else ""
        line.show(f"{job_id}: {d.state}{why} [{duration(time.monotonic() - start)}]")

    try:
        return client.wait(job_id, on_update=show)
    finally:
        line.done()


def _finish(detail: JobDetail) -> None:
    s = detail.job_status
    msg = f"{detail.id}: {s.state}" + (f", exit code {s.app_exit_code}" if s.app_exit_code is not None else "")
    if s.state != JobState.SUCCEEDED and s.app_exit_diagnostics:
        msg += f"\n  {s.app_exit_diagnostics}"
    click.echo(msg, err=True)
    if s.state != JobState.SUCCEEDED:
        sys.exit(EXIT_JOB_FAILED)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--wait", "-w", is_flag=True, help="Wait for the job to end; exit 1 if it FAILED or was STOPPED.")
@click.option("--follow", "-f", is_flag=True, help="Stream the first task's log until the job ends (implies --wait).")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Set a parameter (v1: a jobEnv).")
@click.option("--name", help="Submit under this job name instead of the file's.")
@profile_option
@handle_errors
def submit(file: str, wait: bool, follow: bool, params: tuple[str, ...], name: str | None, profile: str | None) -> None:
    """Submit a job FILE (v2 YAML or v1 JSON; - reads stdin) and print its id."""
    text = sys.stdin.read() if file == "-" else click.open_file(file, encoding="utf-8").read()
    client = client_for(profile)
    origin = gather("cli", code=Path(file).resolve().parent if file != "-" else Path.cwd())
    job_id = client.submit(text, name=name, params=_params(params) or None, origin=origin)
    with _keeps_running(job_id):  # from the moment the id is out: Ctrl-C then may come at any point
        click.echo(job_id)
        from ..protocol.containerpaths import submit_notes

        for path, message in submit_notes(client, text):
            click.echo(f"pai: note: {path}: {message}", err=True)
        if follow:
            for chunk in client.follow(job_id):
                click.echo(chunk, nl=False)
            _finish(client.wait(job_id))
        elif wait:
            _finish(_wait(client, job_id))


@contextlib.contextmanager
def _keeps_running(job_id: str) -> Iterator[None]:
    """Ctrl-C while waiting stops the waiting, not the job: say so, and how to stop it (exit 130)."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo(
            f"\npai: interrupted; {job_id} was submitted and keeps running. Follow it with: pai status "
            f"{job_id} / pai logs {job_id} -f; stop it with: pai stop {job_id}",
            err=True,
        )
        sys.exit(130)


@click.command("jobs")
@click.option("--state", "-s", help="Only jobs in this state (WAITING, RUNNING, SUCCEEDED, FAILED, STOPPED).")
@click.option("--user", "-u", help="Jobs of this user (default: yours).")
@click.option("--all", "all_users", is_flag=True, help="Every user's jobs (admins).")
@click.option("--limit", "-n", type=click.IntRange(1), default=50, show_default=True)
@output_option
@profile_option
@handle_errors
def jobs_cmd(
    state: str | None, user: str | None, all_users: bool, limit: int, output: str, profile: str | None
) -> None:
    """List jobs, newest first."""
    rows = client_for(profile).list_jobs(state=state, user=user, all_users=all_users, limit=limit)
    if output == "json":
        click.echo(json.dumps([j.model_dump(mode="json", by_alias=True) for j in rows], indent=2))
        return
    if not rows:
        click.echo("no jobs")
        return
    click.echo(
        table(
            ["JOB", "STATE", "SUBMITTED", "DURATION", "VC", "RETRIES", "TASKS", "GPUS", "EXIT"],
            [
                [
                    j.id,
                    j.state,
                    j.submission_time,
                    duration(j.duration_s),
                    j.virtual_cluster,
                    j.retries,
                    j.total_task_number,
                    j.total_gpu_number,
                    j.app_exit_code,
                ]
                for j in rows
            ],
        )
    )


@click.command()
@click.argument("job")
@click.option(
    "--config",
    "-c",
    "config",
    is_flag=True,
    help="Print the job's submitted config instead (v2 YAML or v1 JSON as sent; secrets masked).",
)
@output_option
@profile_option
@handle_errors
def status(job: str, config: bool, output: str, profile: str | None) -> None:
    """A job's state, why it waits, and its tasks (state, IP, ports, exit code, diagnostics)."""
    from ..notebook.display import task_diagnostics

    if config:
        click.echo(client_for(profile).config(job).rstrip("\n"))
        return
    d = client_for(profile).detail(job)
    if output == "json":
        click.echo(
            json.dumps(
                {
                    **d.job_status.model_dump(mode="json", by_alias=True),
                    "tasks": [t.model_dump(mode="json", by_alias=True) for t in d.tasks],
                },
                indent=2,
            )
        )
        return
    s = d.job_status
    click.echo(f"{d.id}: {s.state}" + (f" (exit code {s.app_exit_code})" if s.app_exit_code is not None else ""))
    if s.state == JobState.WAITING and s.waiting_reason:
        click.echo(f"  waiting: {s.waiting_reason}")
    if s.app_exit_diagnostics and s.state != JobState.SUCCEEDED:
        click.echo(f"  {s.app_exit_diagnostics}")
    click.echo(
        f"  submitted {s.submission_time:%Y-%m-%d %H:%M:%S}, retries {s.retries}, VC {s.virtual_cluster}"
        if s.submission_time
        else ""
    )
    click.echo(
        table(
            ["ROLE", "INDEX", "STATE", "IP", "PORTS", "EXIT", "DIAGNOSTICS"],
            [
                [
                    t.role,
                    t.task_index,
                    t.task_state,
                    t.container_ip,
                    t.ports or None,
                    t.container_exit_code,
                    task_diagnostics(d, t)[:100] or None,
                ]
                for t in d.tasks
            ],
        )
    )


@click.command()
@click.argument("job")
@click.option("--role", "-r", help="Task role (default: the first).")
@click.option("--index", "-i", type=int, default=0, show_default=True, help="Task index in the role.")
@click.option(
    "--stream",
    type=click.Choice(["all", "stdout", "stderr", "runtime"]),
    default="all",
    show_default=True,
    help="runtime: the runtime's own notices (e.g. an image the process runtime did not use), where it wrote some.",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing as the task writes, until it ends.")
@click.option("--tail", is_flag=True, help="Only the last 16 KiB.")
@profile_option
@handle_errors
def logs(job: str, role: str | None, index: int, stream: str, follow: bool, tail: bool, profile: str | None) -> None:
    """Print a task's log."""
    client = client_for(profile)
    if follow:
        for chunk in client.follow(job, role=role, index=index, stream=stream):
            click.echo(chunk, nl=False)
        return
    click.echo(client.logs(job, role=role, index=index, stream=stream, tail=tail), nl=False)


@click.command()
@click.argument("job")
@profile_option
@handle_errors
def stop(job: str, profile: str | None) -> None:
    """Stop a job (all its tasks)."""
    click.echo(f"stopping {client_for(profile).stop(job)}")


@click.command()
@click.argument("job")
@click.option(
    "--class",
    "priority",
    type=click.Choice(["crit", "prod", "test", "oppo", "default"]),
    help="The job's priority class (HiveD's jobPriorityClass; default: none).",
)
@click.option("--position", type=click.IntRange(0), help="Its place among the waiting jobs of its class (0: first).")
@profile_option
@handle_errors
def priority(job: str, priority: str | None, position: int | None, profile: str | None) -> None:
    """Change a job's priority class or its place in the queue (admins, the embedded cluster)."""
    if priority is None and position is None:
        raise click.UsageError("give --class, --position or both")
    client = client_for(profile)
    answer = client.set_priority(job, priority, position=position)
    ahead = answer.ahead
    where = "" if ahead is None else f", {ahead} job{'s' * (ahead != 1)} ahead of it"
    click.echo(f"{client.job_id(job)}: priority {answer.job_priority}{where}")


@click.command()
@click.argument("job")
@click.option("--name", help="Name of the copy (default: the name with a random suffix).")
@click.option("--wait", "-w", is_flag=True, help="Wait for the copy to end.")
@profile_option
@handle_errors
def clone(job: str, name: str | None, wait: bool, profile: str | None) -> None:
    """Submit the exact config of JOB again under a new name."""
    client = client_for(profile)
    new = client.clone(job, name=name)
    click.echo(new)
    if wait:
        with _keeps_running(new):
            _finish(_wait(client, new))


@click.command()
@click.argument("job")
@profile_option
@handle_errors
def delete(job: str, profile: str | None) -> None:
    """Delete a finished job and its logs (embedded cluster only)."""
    click.echo(f"deleted {client_for(profile).delete(job)}")


COMMANDS = [submit, jobs_cmd, status, logs, stop, priority, clone, delete]
