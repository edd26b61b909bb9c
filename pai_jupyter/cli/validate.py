"""``pai validate FILE...``: check job files without submitting them."""

from __future__ import annotations

import json
import sys

import click

EXIT_BAD_INPUT = 2


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json prints one object per file.",
)
def validate(files: tuple[str, ...], output: str) -> None:
    """Check each job FILE (v1 JSON or v2 YAML; - reads stdin).

    Prints ``ok`` and a summary (roles, tasks, total CPU / GPU / memory) per valid file, or every problem
    with its field path. Exits 2 if any file is invalid, empty or unreadable.
    """
    from ..protocol import Job, JobValidationError, containerpaths  # here, not at import: `pai --help` stays fast

    failed = False
    results = []
    for name in files:
        try:
            job = Job.from_text(sys.stdin.buffer.read(), source="<stdin>") if name == "-" else Job.from_file(name)
        except JobValidationError as exc:
            failed = True
            if output == "json":
                results.append({"file": name, "ok": False, **exc.to_dict()})
            else:
                click.echo(f"{name}: invalid", err=False)
                for problem in exc.problems:
                    click.echo(f"  {problem}")
            continue
        notes = containerpaths.notes(job)  # container paths of the platform's docs: what to use instead
        if output == "json":
            results.append(
                {
                    "file": name,
                    "ok": True,
                    "name": job.name,
                    "format": job.source_format,
                    "summary": job.summary(),
                    "notes": [{"path": p, "message": m} for p, m in notes],
                }
            )
        else:
            click.echo(f"{name}: ok ({job.source_format})")
            click.echo("  " + job.summary().replace("\n", "\n  "))
            for path, message in notes:
                click.echo(f"  note: {path}: {message}")
    if output == "json":
        click.echo(json.dumps(results, indent=2))
    if failed:
        sys.exit(EXIT_BAD_INPUT)
