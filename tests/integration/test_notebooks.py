"""The example notebooks: each runs top to bottom with nbclient in a real kernel against the
embedded cluster (the test's daemon) and shows what it is about; each is kept with its outputs cleared."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.helpers.daemon import Api
from tests.helpers.notebook import cell_text

pytestmark = pytest.mark.slow
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
EXAMPLES = ("mnist", "distributed", "estimator", "form", "sweep")


def run(name: str, tmp_path: Path, after: str = "") -> list[str]:
    """Execute notebooks/NAME.ipynb in a copy of notebooks/ (jobs/ and scripts/ beside it), then the cell ``after``
    (a check of what Run All left) when given; every code cell's text."""
    work = tmp_path / "notebooks"
    for folder in ("jobs", "scripts"):
        shutil.copytree(NOTEBOOKS / folder, work / folder)
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    if after:
        nb.cells.append(nbformat.v4.new_code_cell(after))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    out = [cell_text(c) for c in nb.cells if c.cell_type == "code"]
    assert not [t for t in out if "ERROR " in t or "Traceback" in t], out
    return out


@pytest.mark.parametrize("name", EXAMPLES)
def test_notebooks_are_kept_with_outputs_cleared(name: str) -> None:
    nb: Any = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (name, cell.source[:60])
    assert "widgets" not in nb.metadata


def test_mnist_trains_writes_scalars_and_a_model(daemon: Api, tmp_path: Path) -> None:
    # the last cell stopped the embedded TensorBoard, so Run All ended on "599 Unknown HTTP Error"
    out = run(
        "mnist",
        tmp_path,
        after="import httpx\nprint('board after Run All:', httpx.get(f'http://127.0.0.1:{board.port}/').status_code)",
    )
    assert "board after Run All: 200" in out[-1], out[-1]
    text = "\n".join(out)
    assert "SUCCEEDED, exit code 0" in text
    assert "step 80 loss=" in text and "model saved to" in text
    assert "train/loss" in text and "test/accuracy" in text  # the curve's series, read back from the event files
    metrics = json.loads(next((tmp_path / "notebooks" / "models").glob("mnist-*/metrics.json")).read_text())
    assert metrics["steps"] == 80 and metrics["accuracy"] > 0.3  # it learned something (10 classes: chance 0.1)


def test_distributed_roles_find_each_other(daemon: Api, tmp_path: Path) -> None:
    out = run("distributed", tmp_path)
    text = "\n".join(out)
    assert text.count("ps answered 200") == 2  # both workers reached the ps at its PAI_* address
    assert "I am worker[0]; the ps is at 127.0.0.1:" in text
    assert "PAI_PORT_LIST_ps_0_grpc=" in text and "PAI_TASK_ROLE_LIST=" in text


def test_distributed_sizes_itself_to_a_two_cpu_cluster(two_cpus: Api, tmp_path: Path) -> None:
    """The ps and two workers needed 3 CPUs at once: the submit was refused and every later cell said "no job was
    submitted from this notebook yet"."""
    text = "\n".join(run("distributed", tmp_path))
    assert "2 CPUs: 1 ps and 1 worker(s)" in text and text.count("ps answered 200") == 1, text
    assert "SUCCEEDED" in text and "I am worker[0]; the ps is at 127.0.0.1:" in text


def test_estimator_fits_and_writes_its_model(daemon: Api, tmp_path: Path) -> None:
    out = run("estimator", tmp_path)
    assert "'SUCCEEDED'" in out[-2]
    assert "'slope': 2.0" in out[-1] or "'slope': 1.99" in out[-1], out[-1]
    assert "fitted y = 2.000 x + 1.000" in "\n".join(out)


def test_form_validates_submits_and_lists(daemon: Api, tmp_path: Path) -> None:
    # the last cell closed the job list, so Run All ended with it gone
    out = run("form", tmp_path, after="print('job list open:', jobs.comm is not None)")
    assert "job list open: True" in out[-1], out[-1]
    text = "\n".join(out)
    assert "taskRoles[0].memoryMB" in text  # the bad value's problem, with its field path
    assert "[]" in text  # none left after the fix
    assert "'SUCCEEDED'" in text


def test_sweep_runs_a_grid_and_an_optuna_sweep_and_reattaches(daemon: Api, tmp_path: Path) -> None:
    out = run("sweep", tmp_path)
    text = "\n".join(out)
    assert "best trial 4 {'x': 0.3, 'lr': 0.01} loss 0.0" in text  # the grid's centre is the bowl's bottom
    assert "done 12 trials; best" in text
    assert re.search(r"done \S+~optuna-\d{4}-\d{6}-00\d\d", text), out[-2]  # re-attached by name: its best trial's job
    assert re.search(r"sweep optuna-\d{4}-\d{6} is done", out[-1])  # %pai_sweep NAME --attach
