"""The same sweep on the Slurm backend (a real two-node cluster, tests/slurm/cluster.sh): the profile is all that
changes; trials are Slurm jobs, their reports are read from their task directories as on the process runtime."""

from __future__ import annotations

import pytest

from pai_jupyter.client import Client
from pai_jupyter.sweep import Sweep
from tests.helpers.daemon import Api
from tests.helpers.sweeps import template

pytestmark = [pytest.mark.slurm]


def test_a_grid_sweep_runs_on_slurm(slurm: Api) -> None:
    with Client() as client:
        sweep = Sweep("slurm", template(), {"x": [0.0, 0.3, 0.6], "lr": [0.01]}, client=client, poll=0.1)
        sweep.run(timeout=180)
    assert [t["state"] for t in sweep.trials] == ["SUCCEEDED"] * 3, sweep.trials
    assert sweep.best()["params"] == {"x": 0.3, "lr": 0.01}  # type: ignore[index]
    assert all(t["intermediate"] == {"0": pytest.approx(2 * t["value"]), "1": pytest.approx(1.5 * t["value"]),
                                     "2": pytest.approx(t["value"])} for t in sweep.trials)  # fmt: skip
