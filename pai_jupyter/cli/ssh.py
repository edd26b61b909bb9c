"""``pai ssh-info``, ``pai ssh`` and ``pai ssh-key add|list|remove``: into a job's tasks over SSH."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import click

from .common import EXIT_BAD_INPUT, client_for, handle_errors, output_option, profile_option, table
from .group import PaiGroup

role_option = click.option("--role", "-r", help="Task role (default: every role; `pai ssh`: the first).")
index_option = click.option("--index", "-i", type=int, help="Task index (default: every task; `pai ssh`: 0).")
identity_option = click.option(
    "--identity", "-k", help="Private key to use instead of the job's (embedded cluster) or ~/.ssh/id_* (OpenPAI)."
)


@click.command("ssh-info")
@click.argument("job")
@role_option
@index_option
@identity_option
@profile_option
@output_option
@handle_errors
def ssh_info(
    job: str, role: str | None, index: int | None, identity: str | None, profile: str | None, output: str
) -> None:
    """Where each task's sshd listens, the key, the exact ssh / scp commands and a ~/.ssh/config block."""
    from ..client.ssh import ssh_info as info

    targets = info(client_for(profile), job, role=role, index=index, identity=identity)
    if output == "json":
        click.echo(json.dumps([t.to_dict() for t in targets], indent=2))
        return
    for t in targets:
        click.echo(f"== {t.role}[{t.index}] ({t.state})")
        if t.problem:
            click.echo(f"   problem: {t.problem}")
        if not t.host or not t.port:
            click.echo("   no ssh address yet")
            continue
        cmds = t.commands()
        click.echo(f"   host {t.host}  port {t.port}  user {t.user}  key {t.key or '(none found: use --identity)'}")
        if t.known_hosts:
            check = (
                "the first one seen is kept"
                if t.trust_first
                else "pinned as its sshd reported it"
                if t.host_key
                else "not reported yet (its sshd is starting)"
            )
            click.echo(f"   host key: {check}, in {t.known_hosts}")
        click.echo(f"   ssh:  {cmds['ssh']}")
        click.echo(f"   scp:  {cmds['scp']}")
        click.echo("   ~/.ssh/config (VS Code Remote-SSH and other IDEs):")
        click.echo("\n".join("     " + line for line in cmds["config"].splitlines()))


@click.command("ssh", context_settings={"ignore_unknown_options": True})
@click.argument("job")
@role_option
@index_option
@identity_option
@profile_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def ssh(
    job: str, role: str | None, index: int | None, identity: str | None, profile: str | None, command: tuple[str, ...]
) -> None:
    """Open a shell in a task (or run COMMAND there) with the system's ssh client."""
    from ..client.ssh import ssh_info as info

    targets = info(client_for(profile), job, role=role, index=0 if index is None else index, identity=identity)
    target = targets[0]
    if not shutil.which("ssh"):
        click.echo("pai: no ssh client on this machine (install openssh-client)", err=True)
        sys.exit(EXIT_BAD_INPUT)
    argv = target.ssh_argv(" ".join(command) if command else None)
    if not command and sys.stdin.isatty():
        argv.insert(1, "-t")
    sys.stdout.flush()
    os.execvp(argv[0], argv)


@click.group("ssh-key", cls=PaiGroup)
def ssh_key() -> None:
    """Your public keys: every task of your jobs with the ssh plugin lets them in (embedded cluster)."""


@ssh_key.command("add")
@click.argument("title")
@click.argument("public_key", metavar="PUBLIC_KEY_OR_FILE")
@profile_option
@handle_errors
def key_add(title: str, public_key: str, profile: str | None) -> None:
    """Store a public key (the key text, or a .pub file) under TITLE."""
    from ..client.ssh import add_key

    value = Path(public_key).expanduser().read_text() if Path(public_key).expanduser().is_file() else public_key
    add_key(client_for(profile), title, value.strip())
    click.echo(f"ssh key {title!r} added")


@ssh_key.command("list")
@profile_option
@output_option
@handle_errors
def key_list(profile: str | None, output: str) -> None:
    """Your stored public keys."""
    from ..client.ssh import list_keys

    keys = list_keys(client_for(profile))
    if output == "json":
        click.echo(json.dumps(keys, indent=2))
        return
    click.echo(
        table(["title", "key"], [[k["title"], k["value"][:60] + ("…" if len(k["value"]) > 60 else "")] for k in keys])
        if keys
        else "no ssh keys stored"
    )


@ssh_key.command("remove")
@click.argument("title")
@profile_option
@handle_errors
def key_remove(title: str, profile: str | None) -> None:
    """Remove the stored public key TITLE."""
    from ..client.ssh import remove_key

    remove_key(client_for(profile), title)
    click.echo(f"ssh key {title!r} removed")


COMMANDS = [ssh_info, ssh, ssh_key]
