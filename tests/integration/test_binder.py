"""binder/: the files Binder (repo2docker) uses install this package with its labextension and start
the embedded cluster on the process runtime. ``postBuild`` runs for real in a fresh virtualenv on a clean copy
of the repository (tracked and new files only: no node_modules, no built assets), as repo2docker runs it; then
``start`` starts the cluster and hands over to the command it was given, and a job runs there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pai_jupyter.cluster import control
from tests.helpers.daemon import kill_leftovers

pytestmark = [pytest.mark.slow, pytest.mark.binder]  # `make test-binder` (CI runs it), not `make test`
ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"


def test_the_environment_has_python_node_and_pip() -> None:
    env = yaml.safe_load((BINDER / "environment.yml").read_text())
    deps = [d for d in env["dependencies"] if isinstance(d, str)]
    assert any(d.startswith("python=3.") for d in deps)
    assert any(d.startswith("nodejs") for d in deps) and "pip" in deps
    for script in ("postBuild", "start"):
        assert os.access(BINDER / script, os.X_OK), script
        subprocess.run(["bash", "-n", str(BINDER / script)], check=True)


def clean_copy(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    for name in files:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.mark.timeout(900)
def test_post_build_installs_and_start_runs_the_cluster(tmp_path: Path) -> None:
    if not shutil.which("npm"):
        pytest.fail("npm is needed to build the labextension (.ci/run installs nodejs and npm)")
    repo = clean_copy(tmp_path / "repo")
    assert not (repo / "pai_jupyter" / "labextension").exists()  # built by the install, never committed
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    env.pop("PAI_PROFILE", None)
    built = subprocess.run(["bash", "binder/postBuild"], cwd=repo, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "pai-jupyter" in built.stdout and "enabled" in built.stdout  # its own check of the labextension
    assert (venv / "share" / "jupyter" / "labextensions" / "pai-jupyter" / "package.json").is_file()
    home = tmp_path / "home"
    env["PAI_JUPYTER_HOME"] = str(home)
    try:
        started = subprocess.run(
            ["bash", "binder/start", "pai", "cluster", "status"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert started.returncode == 0, started.stdout + started.stderr
        assert "runtime:  process" in started.stdout  # start handed over to the command it was given
        job = subprocess.run(
            ["pai", "submit", "--wait", "-"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            input='{"jobName": "binder-hello", "image": "python:3.11", "taskRoles": '
            '[{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, '
            '"command": "echo hello from binder"}]}',
        )
        assert job.returncode == 0 and "SUCCEEDED" in job.stdout + job.stderr, job.stdout + job.stderr
    finally:
        control.stop(home)
        kill_leftovers(home)
