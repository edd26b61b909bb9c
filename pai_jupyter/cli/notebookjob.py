"""``pai run-notebook NB.ipynb -p lr 0.1``: a notebook as a batch job (papermill in a task; the executed copy in
the job's output as it runs). The job itself is built by ``protocol.notebookjob``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from .common import EXIT_BAD_INPUT, client_for, handle_errors
from .jobs import _finish, _keeps_running, _wait


def _value(text: str) -> Any:
    try:
        return json.loads(text)  # numbers and booleans keep their type, as papermill's -p does
    except ValueError:
        return text


@click.command("run-notebook")
@click.argument("notebook", type=click.Path(exists=True, dir_okay=False))
@click.option("--param", "-p", "params", nargs=2, multiple=True, metavar="NAME VALUE", help="A notebook parameter.")
@click.option(
    "--source-dir",
    type=click.Path(exists=True, file_okay=False),
    help="The folder that travels with the job (default: the notebook's own folder).",
)
@click.option("--wait", "-w", is_flag=True, help="Wait for the job to end; exit 1 if it FAILED or was STOPPED.")
@click.option("--name", help="The job's name (default: the notebook's with a time stamp).")
@click.option("--image", default="python:3.11", show_default=True, help="Docker image (needs papermill + ipykernel).")
@click.option("--cpu", type=click.IntRange(1), default=1, show_default=True)
@click.option("--gpu", type=click.IntRange(0), default=0, show_default=True)
@click.option("--memory", "memory_mb", type=click.IntRange(100), default=2048, show_default=True, help="MB.")
@click.option("--virtual-cluster", "--vc", "virtual_cluster", default="default", show_default=True)
@click.option("--kernel", "-k", default="python3", show_default=True, help="The kernel papermill runs it with.")
@click.option("--profile", envvar="PAI_PROFILE", help="Cluster profile (default: the default one).")
@handle_errors
def run_notebook(
    notebook: str,
    params: tuple[tuple[str, str], ...],
    source_dir: str | None,
    wait: bool,
    name: str | None,
    image: str,
    cpu: int,
    gpu: int,
    memory_mb: int,
    virtual_cluster: str,
    kernel: str,
    profile: str | None,
) -> None:
    """Run NOTEBOOK as a job with papermill and print the job's id; the executed notebook is written to the
    job's output after each cell (open it in Lab from the job page, or read it with ``pai status``)."""
    from ..common.origin import gather
    from ..protocol.notebookjob import notebook_job

    path = Path(notebook).resolve()
    folder = Path(source_dir).resolve() if source_dir else path.parent
    try:
        relative = path.relative_to(folder).as_posix()
        job = notebook_job(
            relative,
            str(folder),
            {k: _value(v) for k, v in params},
            name=name,
            image=image,
            cpu=cpu,
            gpu=gpu,
            memory_mb=memory_mb,
            virtual_cluster=virtual_cluster,
            kernel=kernel,
        )
    except ValueError as exc:
        click.echo(f"pai: {exc}", err=True)
        raise SystemExit(EXIT_BAD_INPUT) from None
    client = client_for(profile)
    if not client.locality().embedded:
        click.echo(
            f"pai: run-notebook needs the embedded cluster (the notebook's folder travels with the job); "
            f"{client.profile.name} is a remote OpenPAI",
            err=True,
        )
        raise SystemExit(EXIT_BAD_INPUT)
    job_id = client.submit(job, origin=gather("notebook", notebook=str(path), code=folder))
    click.echo(job_id)
    if wait:
        with _keeps_running(job_id):
            _finish(_wait(client, job_id))


COMMANDS = [run_notebook]
