"""The JupyterLab page tests' shared set-up: ``env``, a daemon and a Jupyter server with the labextension, once per
module, and ``lab_page``, a browser page of that Lab per test (fixtures: a module imports them and its tests ask for
them by name). In the tests ``lab_page`` is always a browser page, ``lab_server`` a Jupyter server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import open_lab_page
from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import JupyterServer, services_job, write_events
from tests.helpers.servers import servers

SECOND_VC = "research"  # the env's cluster.yaml defines it beside default


@dataclass
class Env:
    api: Api
    jupyter: JupyterServer
    live: str  # a job that keeps running, with TensorBoard
    root: Path  # the Lab's root directory


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("lab-browser")
    with servers(tmp) as s:
        (s.home / "local").mkdir(parents=True)  # a second virtual cluster, for the form's choice of them
        (s.home / "local" / "cluster.yaml").write_text(f"virtualClusters:\n  {SECOND_VC}: {{cpu: 2, memoryMB: 2048}}\n")
        api = s.daemon()
        logdir = write_events(tmp / "tb")
        live = api.submit_ok(services_job("lab-live", tensorboard=str(logdir)))
        jupyter = s.jupyter(lab=True, lab_settings={"refreshSeconds": 1})
        yield Env(api, jupyter, live, tmp / "jupyter" / "root")


@pytest.fixture
def lab_page(env: Env, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A Lab page with the PAI sidebar open in a fresh layout; a screenshot on failure."""
    yield from open_lab_page(browser, env.jupyter, request)
