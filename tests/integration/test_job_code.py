"""What of a folder becomes a job's code (cluster/task/codecopy.py), through the real commands: ``pai
run-notebook`` from a folder that holds the cluster's home (the default layout: a notebook in ``~``, the home at
``~/.pai-jupyter``) runs, the folder's ``.paiignore`` is honoured, a folder past the bound is refused with its
biggest entries named, and the Estimator's ``source_dir`` gets the same."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.cluster.task.codecopy import LIMIT_ENV
from tests.helpers.daemon import Api
from tests.helpers.notebook import gated_notebook, papermill_servers

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """A daemon whose home is ``<user folder>/.pai-jupyter`` (as ``~/.pai-jupyter`` is in ``~``), with a 1 MB bound
    on a job's code; the user folder is ``api.home.parent``."""
    tmp: Path = tmp_path_factory.mktemp("jobcode")
    with pytest.MonkeyPatch.context() as mp, papermill_servers(tmp) as (s, _gates):
        mp.setenv(LIMIT_ENV, "1")  # the daemon's environment
        yield s.daemon(home=tmp / "user" / ".pai-jupyter")


def _run_notebook(api: Api, notebook: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pai_jupyter.cli", "run-notebook", notebook.name, *args],
        cwd=notebook.parent,
        capture_output=True,
        text=True,
        env={**os.environ, "PAI_JUPYTER_HOME": str(api.home)},
        timeout=120,
    )


def _usercode(api: Api, job: str) -> Path:
    return api.home / "local" / "jobs" / job / "ml" / "usercode"


def _events(api: Api, job: str) -> str:
    r = api.http.get(f"/api/v2/jobs/{job}/events")
    assert r.status_code == 200, r.text
    return "\n".join(e["message"] for e in r.json()["data"] if e["reason"] == "CodeCopied")


def test_run_notebook_from_the_folder_that_holds_the_cluster_home(home_daemon: Api) -> None:
    """The default layout failed with "could not prepare the job's /ml layout": the copy of ``~`` took
    ``~/.pai-jupyter`` along, and with it the new job's own directory, into itself."""
    user = home_daemon.home.parent
    gated_notebook(user / "train.ipynb")
    (user / "helper.py").write_text("VALUE = 1\n")
    for _ in range(2):  # the second job's folder holds the first job's directory too
        done = _run_notebook(home_daemon, user / "train.ipynb", "-p", "lr", "0.5", "--wait")
        assert done.returncode == 0, done.stdout + done.stderr
        job = done.stdout.splitlines()[0].strip()
        assert home_daemon.detail(job)["jobStatus"]["state"] == "SUCCEEDED"
        names = {p.name for p in _usercode(home_daemon, job).iterdir()}
        assert {"helper.py", "train.ipynb"} <= names and ".pai-jupyter" not in names, names
        assert ".pai-jupyter/ (the cluster's home)" in _events(home_daemon, job)


def test_paiignore_and_the_size_bound(home_daemon: Api) -> None:
    folder = home_daemon.home.parent / "exp"
    gated_notebook(folder / "train.ipynb")
    (folder / "data").mkdir()
    (folder / "data" / "big.bin").write_bytes(b"\0" * (2 << 20))
    (folder / "venv").mkdir()
    (folder / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")  # a virtualenv: left out by default
    (folder / "venv" / "huge.bin").write_bytes(b"\0" * (2 << 20))
    refused = _run_notebook(home_daemon, folder / "train.ipynb")
    assert refused.returncode != 0
    said = refused.stderr
    assert "is too big to copy as the job's code" in said and "data/ (2.0 MB)" in said, said
    assert "venv" not in said and ".paiignore" in said and LIMIT_ENV in said, said
    (folder / ".paiignore").write_text("data/\n")
    done = _run_notebook(home_daemon, folder / "train.ipynb", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    code = _usercode(home_daemon, done.stdout.splitlines()[0].strip())
    assert sorted(p.name for p in code.iterdir()) == [".paiignore", "train.ipynb"]


def test_the_estimators_source_dir_is_chosen_the_same_way(home_daemon: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    from pai_jupyter.sdk.estimator import Estimator

    monkeypatch.setenv("PAI_JUPYTER_HOME", str(home_daemon.home))
    src = home_daemon.home.parent  # the folder that holds the cluster's home
    (src / "train.py").write_text("print('trained')\n")
    (src / "weights.pt").write_bytes(b"\0" * (3 << 20))
    est = Estimator(command="python3 train.py", source_dir=src, memory=512)
    with pytest.raises(Exception, match=r"too big to copy as the job's code.*weights\.pt \(3\.0 MB\)"):
        est.fit(logs=False)
    (src / ".gitignore").write_text("*.pt\n")
    detail = est.fit(logs=False)
    assert not isinstance(detail, str) and detail.state == "SUCCEEDED"
    assert est.job is not None
    code = _usercode(home_daemon, est.job)
    assert (code / "train.py").is_file() and not (code / "weights.pt").exists()
    assert not (code / ".pai-jupyter").exists()
