"""``pai kernel install|list|remove``: Jupyter kernelspecs whose kernel runs as a PAI job."""

from __future__ import annotations

import json
import sys

import click

from .common import EXIT_BAD_INPUT, output_option, table
from .group import PaiGroup


def _fail(exc: Exception) -> None:
    click.echo(f"pai: {exc}", err=True)
    sys.exit(EXIT_BAD_INPUT)


@click.group(cls=PaiGroup)
def kernel() -> None:
    """Kernelspecs whose kernel runs as a PAI job (listed in JupyterLab's launcher)."""


@kernel.command()
@click.option("--name", help="Kernelspec name (default: pai[-PROFILE][-NgpU]).")
@click.option("--profile", "-p", help="Cluster profile the kernel's job goes to (default: the default profile).")
@click.option("--gpu", type=int, default=0, show_default=True)
@click.option("--cpu", type=int, default=1, show_default=True)
@click.option("--memory-mb", type=int, default=4096, show_default=True)
@click.option(
    "--image",
    help="Image of the kernel's task; it needs python and ipykernel "
    "(default: jupyter/base-notebook:latest; unused on a process runtime).",
)
@click.option(
    "--python",
    help="Python that runs ipykernel in the task (default: the Jupyter server's own python "
    "on the embedded cluster's process runtime, else python3).",
)
@click.option("--virtual-cluster", help="Virtual cluster of the kernel's job (default: default).")
@click.option("--display-name", help="Name shown in the launcher.")
@click.option(
    "--start-timeout", type=float, help="Seconds to wait for the job to run and its kernel to answer (default: 300)."
)
@click.option("--sys-prefix", is_flag=True, help="Install into this Python environment instead of the user's dir.")
@click.option(
    "--tunnel",
    type=click.Choice(["auto", "always", "never"]),
    help="How Jupyter reaches the kernel: auto (directly; through an SSH tunnel to the task where a remote "
    "task's ports do not answer), always (the SSH tunnel), never (directly). Default: auto.",
)
@click.option(
    "--ssh-plugin/--no-ssh-plugin",
    default=None,
    help="Give the kernel's job the ssh plugin that the tunnel logs into (default: with --tunnel always, "
    "and with auto on a remote OpenPAI).",
)
@click.option(
    "--identity",
    "-i",
    help="Private key the tunnel logs in with (default: the job's key on the "
    "embedded cluster, ~/.ssh/id_ed25519 on OpenPAI).",
)
def install(
    name: str | None,
    profile: str | None,
    gpu: int,
    cpu: int,
    memory_mb: int,
    image: str | None,
    python: str | None,
    virtual_cluster: str | None,
    display_name: str | None,
    start_timeout: float | None,
    sys_prefix: bool,
    tunnel: str | None,
    ssh_plugin: bool | None,
    identity: str | None,
) -> None:
    """Install a kernelspec whose kernel runs as a one-task PAI job with these resources."""
    from ..kernel.kernelspec import KernelSpecError
    from ..kernel.kernelspec import install as do_install

    try:
        spec = do_install(
            name,
            profile=profile,
            gpu=gpu,
            cpu=cpu,
            memory_mb=memory_mb,
            image=image,
            python=python,
            virtual_cluster=virtual_cluster,
            display=display_name,
            start_timeout=start_timeout,
            prefix=sys.prefix if sys_prefix else None,
            tunnel=tunnel,
            ssh_plugin=ssh_plugin,
            identity=identity,
        )
    except (KernelSpecError, OSError) as exc:
        _fail(exc)
    click.echo(f"installed kernelspec {spec.name} ({spec.display_name}) in {spec.resource_dir}")


@kernel.command("list")
@output_option
def list_cmd(output: str) -> None:
    """The installed PAI kernelspecs."""
    from ..kernel.kernelspec import list_specs

    specs = list_specs()
    if output == "json":
        click.echo(
            json.dumps(
                [
                    {"name": s.name, "displayName": s.display_name, "resourceDir": s.resource_dir, **s.config}
                    for s in specs
                ],
                indent=2,
            )
        )
        return
    click.echo(
        table(
            ["NAME", "DISPLAY NAME", "PROFILE", "GPU", "CPU", "MEMORY MB", "IMAGE"],
            [
                [
                    s.name,
                    s.display_name,
                    s.config.get("profile", "(default)"),
                    s.config.get("gpu"),
                    s.config.get("cpu"),
                    s.config.get("memory_mb"),
                    s.config.get("image", "(default)"),
                ]
                for s in specs
            ],
        )
    )


@kernel.command()
@click.argument("name")
def remove(name: str) -> None:
    """Remove the PAI kernelspec NAME (other kernelspecs are never touched)."""
    from ..kernel.kernelspec import KernelSpecError
    from ..kernel.kernelspec import remove as do_remove

    try:
        where = do_remove(name)
    except KernelSpecError as exc:
        _fail(exc)
    click.echo(f"removed kernelspec {name} from {where}")
