"""Sweeps of jobs (docs/sweeps.md): ``Sweep`` over a job template or an Estimator, its search space, and
``report`` for the trials. Names load lazily: a trial's ``pai_jupyter.report`` imports the standard library only.
The views (``SweepView``) are in ``views`` (ipywidgets, plotly)."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Sweep": "driver",
    "SweepTaken": "driver",
    "sweeps": "driver",
    "trial_job": "driver",
    "report": "reporting",
    "choice": "space",
    "uniform": "space",
    "loguniform": "space",
    "randint": "space",
    "grid": "space",
    "sample": "space",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pai_jupyter.sweep' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
