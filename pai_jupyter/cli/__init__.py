"""The ``pai`` command. Exit codes: 0 ok; 1 the waited job ended FAILED or STOPPED; 2 bad input;
3 server unavailable or unauthorized."""

from __future__ import annotations

import click

from ..common.version import __version__
from .cluster import cluster
from .group import PaiGroup
from .hub import hub
from .jobs import COMMANDS as JOB_COMMANDS
from .kernel import kernel
from .notebookjob import COMMANDS as NOTEBOOK_COMMANDS
from .profile import profile
from .ssh import COMMANDS as SSH_COMMANDS
from .tracking import mlflow
from .usage import usage
from .validate import validate


@click.group(cls=PaiGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pai")
def main() -> None:
    """Build, validate and run OpenPAI-style training jobs: on the embedded local cluster or a real OpenPAI."""


main.add_command(validate)
main.add_command(cluster)
main.add_command(hub)
main.add_command(profile)
main.add_command(kernel)
main.add_command(mlflow)
main.add_command(usage)
for _command in JOB_COMMANDS:
    main.add_command(_command)
for _command in SSH_COMMANDS:
    main.add_command(_command)
for _command in NOTEBOOK_COMMANDS:
    main.add_command(_command)
