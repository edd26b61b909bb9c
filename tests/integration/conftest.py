"""Fixtures that start a real daemon on a free loopback port with its own PAI_JUPYTER_HOME (tests/helpers/daemon.py
starts and calls it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster import control
from tests.helpers.browser import browser  # noqa: F401  (a fixture: the page tests ask for it by name)
from tests.helpers.daemon import (
    Api,
    docker_or_skip,
    kill_leftovers,
    provisioner_installed,
    remove_accounts,
    start_daemon,
)
from tests.slurm.fixture import slurm_cluster  # noqa: F401  (a fixture: the Slurm tests ask for it by name)


@pytest.fixture
def pai_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "pai-home"
    monkeypatch.setenv("PAI_JUPYTER_HOME", str(home))
    return home


@pytest.fixture
def daemon(pai_home: Path) -> Iterator[Api]:
    api = start_daemon(pai_home)
    yield api
    control.stop(pai_home)
    kill_leftovers(pai_home)


@pytest.fixture
def two_cpus(pai_home: Path) -> Iterator[Api]:
    """A daemon of 2 CPUs (a small laptop's default cluster; a job of 2 CPUs makes the next ones wait)."""
    api = start_daemon(pai_home, cpus=2)
    yield api
    control.stop(pai_home)
    kill_leftovers(pai_home)


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """One daemon for the tests of a module that write nothing to it (refused submissions, reads): they need no
    fresh one each (a start is ~1 s on a loaded machine). A test that submits, stops or adds users takes ``daemon``."""
    home = tmp_path_factory.mktemp("shared-daemon") / "pai-home"
    api = start_daemon(home)
    yield api
    control.stop(home)
    kill_leftovers(home)


@pytest.fixture
def kernelspecs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private Jupyter data dir that the kernelspec commands write to and Jupyter reads from."""
    provisioner_installed()
    data = tmp_path / "jupyter-data"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    monkeypatch.setenv("JUPYTER_PATH", str(data))
    return data


@pytest.fixture
def docker_daemon(pai_home: Path) -> Iterator[Api]:
    docker_or_skip()
    api = start_daemon(pai_home, runtime="docker")
    yield api
    control.stop(pai_home)
    import docker

    client = docker.from_env()
    for c in client.containers.list(all=True, filters={"label": "pai.managed=1"}, ignore_removed=True):
        with contextlib.suppress(docker.errors.NotFound):  # (another test's, removed by its own teardown meanwhile)
            if str(pai_home) in str(c.attrs.get("Mounts")):
                c.remove(force=True)


@pytest.fixture
def slurm(slurm_cluster: str, pai_home: Path) -> Iterator[Api]:  # noqa: F811  (the fixture imported above)
    """A daemon on the Slurm runtime, its tasks on the module's two-node test cluster (tests/slurm/)."""
    api = start_daemon(pai_home, runtime="slurm")
    yield api
    control.stop(pai_home)
    remove_accounts(pai_home)
