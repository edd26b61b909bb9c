"""``pai profile list|add|use|remove|login``: where the client talks to."""

from __future__ import annotations

import json
import os
import sys

import click

from ..client.profiles import Profile, ProfileError, get_profile, load_profiles, remove_profile, upsert_profile
from ..client.profiles import use_profile as set_default
from .common import EXIT_BAD_INPUT, handle_errors, output_option, table
from .group import PaiGroup


def _fail(exc: Exception) -> None:
    click.echo(f"pai: {exc}", err=True)
    sys.exit(EXIT_BAD_INPUT)


@click.group(cls=PaiGroup)
def profile() -> None:
    """Cluster profiles ($PAI_JUPYTER_HOME/clusters.yaml). 'local' is the embedded cluster."""


@profile.command("list")
@output_option
def list_cmd(output: str) -> None:
    """Show the profiles (tokens are never shown)."""
    try:
        rows = [p.public() for p in load_profiles()]
    except ProfileError as exc:
        _fail(exc)
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(
        table(
            ["", "NAME", "URL", "USER", "TOKEN"],
            [["*" if r["default"] else "", r["name"], r["url"], r["username"], r["token"]] for r in rows],
        )
    )


@profile.command()
@click.argument("name")
@click.argument("url")
@click.option("--username", "-u", help="Your user name on that cluster.")
@click.option("--token-file", type=click.Path(dir_okay=False), help="Read the token from this file.")
@click.option("--default", "make_default", is_flag=True, help="Use this profile by default.")
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    help="The cluster's daemon runs on this machine: its unix socket (local/api.sock in its home), which the "
    "requests for URL go through, so the token never crosses loopback TCP (`pai cluster user add` prints it).",
)
def add(
    name: str, url: str, username: str | None, token_file: str | None, make_default: bool, socket_path: str | None
) -> None:
    """Add (or replace) profile NAME for the OpenPAI REST server at URL (e.g. https://pai.example/rest-server)."""
    if name == "local":
        _fail(ProfileError("'local' is the embedded cluster's profile; choose another name"))
    if not url.startswith(("http://", "https://")):
        _fail(ProfileError(f"the url must start with http:// or https://, got {url!r}"))
    try:
        upsert_profile(
            Profile(
                name=name,
                url=url,
                username=username or "",
                token_file=token_file,
                default=make_default,
                socket=os.path.abspath(socket_path) if socket_path else None,
            )
        )
    except ProfileError as exc:
        _fail(exc)
    click.echo(
        f"added profile {name}"
        + (" (default)" if make_default else "")
        + ("" if token_file else f"; log in with: pai profile login {name}")
    )


@profile.command()
@click.argument("name")
def use(name: str) -> None:
    """Make NAME the default profile."""
    try:
        set_default(name)
    except ProfileError as exc:
        _fail(exc)
    click.echo(f"default profile: {name}")


@profile.command()
@click.argument("name")
def remove(name: str) -> None:
    """Remove profile NAME."""
    try:
        remove_profile(name)
    except ProfileError as exc:
        _fail(exc)
    click.echo(f"removed profile {name}")


@profile.command()
@click.argument("name", required=False)
@click.option("--username", "-u", help="User name (default: the profile's).")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin instead of asking.")
@handle_errors
def login(name: str | None, username: str | None, password_stdin: bool) -> None:
    """Log in to profile NAME with a password (asked without echo) and store only the token it gives."""
    try:
        prof = get_profile(name)
    except ProfileError as exc:
        _fail(exc)
    user = username or prof.username or click.prompt("user name")
    password = sys.stdin.readline().rstrip("\n") if password_stdin else click.prompt("password", hide_input=True)
    from ..client import Client

    client = Client(prof, username=user, auto_start=True)
    if prof.is_local:
        _fail(ProfileError("the local profile uses the daemon's own token; no login needed"))
    token = client.login(user, password)
    upsert_profile(
        Profile(name=prof.name, url=prof.url, username=user, token=token, default=prof.default, socket=prof.socket)
    )
    click.echo(f"logged in to {prof.name} as {user}; token stored in the profile (mode 0600)")
