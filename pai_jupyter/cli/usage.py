"""``pai usage``: what each user ran in each virtual cluster lately (GPU-, CPU- and memory-hours, jobs started, how
long they waited): the figures fair share orders users by (docs/queue.md, "Usage")."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import click

from ..common.format import duration
from .common import client_for, handle_errors, profile_option, table

if TYPE_CHECKING:
    from ..client.models import UsageFigures

UNITS = {"m": 1 / 60, "h": 1.0, "d": 24.0, "w": 24.0 * 7}
WINDOW = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw]?)\s*$")
HEADERS = (
    "USER",
    "VC",
    "GPU-H",
    "GPU-H USED",
    "GPU-H IDLE",
    "CPU-H",
    "MEM GB-H",
    "JOBS",
    "WAIT MEAN",
    "WAIT MAX",
    "FAIR-SHARE USE",
)


def window_hours(text: str) -> float:
    """``90m``, ``24h``, ``7d``, ``2w``; a bare number is hours."""
    m = WINDOW.match(text.lower())
    if not m or float(m.group(1)) <= 0:
        raise click.BadParameter(f"{text!r}: a duration such as 24h, 7d or 90m")
    return float(m.group(1)) * UNITS[m.group(2) or "h"]


def window_label(h: float) -> str:
    """``7 days``, ``24 hours``, ``1.5 hours``."""
    days = h / 24
    if days >= 1 and days == int(days):
        return f"{int(days)} day{'s' * (days != 1)}"
    return f"{h:g} hour{'s' * (h != 1)}"


def hours(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def line(r: UsageFigures, who: str) -> list[str]:
    return [
        who,
        r.virtual_cluster,
        hours(r.gpu_hours_allocated),
        hours(r.gpu_hours_used),
        hours(r.gpu_hours_idle),
        hours(r.cpu_hours),
        hours(r.memory_gb_hours),
        str(r.jobs_started),
        duration(r.wait_mean_s),
        duration(r.wait_max_s),
        hours(r.fair_share_usage),
    ]


@click.command()
@click.option("--window", "-w", default="7d", show_default=True, help="How far back: 90m, 24h, 7d, 2w.")
@click.option("--user", "-u", help="Only this user's rows (admins; a user sees only their own anyway).")
@click.option("--json", "as_json", is_flag=True, help="Print the daemon's answer as JSON.")
@profile_option
@handle_errors
def usage(window: str, user: str | None, as_json: bool, profile: str | None) -> None:
    """Show GPU-, CPU- and memory-hours, jobs started and waits per user and virtual cluster (the embedded
    cluster): yours, every virtual cluster's totals and, for an admin, everyone's."""
    answer = client_for(profile).usage(window_hours(window), user=user)
    if as_json:
        click.echo(json.dumps(answer.model_dump(mode="json", by_alias=True), indent=2))
        return
    rows = [line(r, r.username or "") for r in answer.rows]
    rows += [line(t, f"(all {t.users})") for t in answer.virtual_clusters]
    click.echo(f"Usage over the last {window_label(answer.window_hours)}:")
    click.echo(table(HEADERS, rows) if rows else "nothing ran.")
    half_life = answer.fair_share.get("halfLifeHours")
    if half_life:
        click.echo(
            f"FAIR-SHARE USE: hours of the whole cluster lately, halved every {half_life:g} h: within a priority class "
            "the user with less goes first."
        )
    if not answer.gpu_use.get("sampled") and answer.gpu_use.get("message"):
        click.echo(f"({answer.gpu_use['message']})", err=True)
