"""The sweep tests' trial: a v2 job template that runs the example notebook's trial script with the sweep's
parameters."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pai_jupyter

ROOT = Path(pai_jupyter.__file__).resolve().parent.parent

TRIAL = ROOT / "notebooks" / "scripts" / "sweep_trial.py"  # the example notebook's trial


def template(steps: int = 3, sleep: float = 0.0) -> str:
    """A v2 job whose command takes the trial's parameters through ``<% $parameters.x %>``."""
    args = f"--x <% $parameters.x %> --lr <% $parameters.lr %> --steps {steps} --sleep {sleep}"
    command = f"PYTHONPATH={ROOT} {sys.executable} {TRIAL} {args}"
    return textwrap.dedent(
        """\
        protocolVersion: 2
        name: trial
        type: job
        prerequisites:
          - {name: img, type: dockerimage, uri: python:3.11}
        taskRoles:
          main:
            instances: 1
            dockerImage: img
            resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
            commands:
              - {command}
        """
    ).replace("{command}", command)
