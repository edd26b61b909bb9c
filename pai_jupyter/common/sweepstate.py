"""What a sweep's state document (docs/sweeps.md) says about its trials, read the same way by its driver
(``sweep/``) and by the Lab's Sweeps page (``server/lab_sweeps.py``): which trial states are final, and which trial
is best."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .states import FINAL, JobState

FINISHED = JobState.SUCCEEDED.value  # a trial whose job succeeded and that reported the objective
PRUNED = "PRUNED"  # a trial the search stopped early (a sweep's own state, not a job's)
ENDED: frozenset[str] = FINAL | {PRUNED}


def best_trial(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The succeeded trial with the best objective for the sweep's ``mode`` (None before one)."""
    done = [t for t in state.get("trials") or [] if t.get("state") == FINISHED and t.get("value") is not None]
    if not done:
        return None
    pick = min if state.get("mode", "min") == "min" else max
    return dict(pick(done, key=lambda t: t["value"]))
