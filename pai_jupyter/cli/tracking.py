"""``pai mlflow env``: this user's MLflow tracking as shell exports, so ``mlflow`` in a notebook or a terminal
reads the runs the cluster made of their jobs (docs/tracking.md)."""

from __future__ import annotations

import shlex

import click

from .common import client_for, handle_errors, profile_option
from .group import PaiGroup


@click.group(cls=PaiGroup)
def mlflow() -> None:
    """Every job an MLflow run: where, and the credentials to read them with."""


@mlflow.command()
@profile_option
@handle_errors
def env(profile: str | None) -> None:
    """Print MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME and your own MLflow credentials as shell exports:
    ``eval "$(pai mlflow env)"``, then ``mlflow`` (or ``MlflowClient()``) sees your jobs' runs, and only yours."""
    info = client_for(profile).tracking()
    exports = {"MLFLOW_TRACKING_URI": info.url, "MLFLOW_EXPERIMENT_NAME": info.experiment}
    if info.password:  # (a site's server without authentication has no accounts)
        exports |= {"MLFLOW_TRACKING_USERNAME": str(info.username), "MLFLOW_TRACKING_PASSWORD": info.password}
    for key, value in exports.items():
        click.echo(f"export {key}={shlex.quote(str(value))}")
