"""What every test shares: the Hypothesis profiles ("full" for ``make test`` and CI, "quick" for
``make test-fast``), chosen by ``PAI_TEST_HYPOTHESIS`` (tests/properties.py), and how pytest-xdist splits the
suite (``make test`` runs ``-n 4 --dist loadgroup``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.properties import PROFILE, PROFILES, QUICK

# tests/helpers/ holds what several test modules share: its asserts say what they compared, as a test module's do.
pytest.register_assert_rewrite("tests.helpers")

if PROFILE not in PROFILES:
    raise RuntimeError(f"PAI_TEST_HYPOTHESIS={PROFILE!r}: one of {', '.join(PROFILES)}")
settings.register_profile("full")
settings.register_profile("quick", max_examples=QUICK)
settings.load_profile(PROFILE)

SLURM_GROUP = "slurm"

# Every daemon a test starts would start an MLflow server of its own (the default where mlflow is installed: seconds
# of CPU and 200 MB each); the tracking tests (test_tracking.py) ask for one with --mlflow on.
os.environ.setdefault("PAI_JUPYTER_MLFLOW", "off")

# A run started in the background (`nohup make test &`, a CI runner's job) inherits SIGINT ignored, and Python then
# never raises KeyboardInterrupt, nor do the `pai` and kernels the tests start (an ignored signal stays ignored across
# exec): the tests of Ctrl-C in a cell and in `pai submit --wait` waited for their jobs to end instead.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def xdist_group(item: pytest.Item) -> str:
    """The worker group of a test: every test on the real Slurm cluster in one (one test cluster, four daemons
    with their bridge and namespaces, at a time per run), any other with the rest of its module, so a module's
    fixtures (a Jupyter server, a browser, a daemon) start once."""
    if item.get_closest_marker("slurm"):
        return SLURM_GROUP
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(wrapper=True)  # a wrapper: marked before xdist's own hook reads the marks (tryfirst is not)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    for item in items:
        if not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(xdist_group(item)))
    yield
