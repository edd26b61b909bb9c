"""The notebook job a CLI call, the Lab and the Estimator build (protocol/notebookjob.py), and the CLI's refusals."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from pai_jupyter.cli import main
from pai_jupyter.protocol import job_from_text
from pai_jupyter.protocol.notebookjob import (
    EXIT_NO_PAPERMILL,
    NOTEBOOK_KEY,
    executed_name,
    notebook_job,
    papermill_command,
)
from pai_jupyter.protocol.rules import ESTIMATOR_KEY


def test_the_job_carries_the_folder_the_parameters_and_where_the_copy_goes() -> None:
    job = notebook_job("sub/train.ipynb", "/src", {"lr": 0.1, "name": "a b"}, name="nb", gpu=1, virtual_cluster="vc1")
    again = job_from_text(job.to_yaml())  # v2 YAML keeps it all
    assert again.extras[ESTIMATOR_KEY] == {"hyperparameters": {"lr": 0.1, "name": "a b"}, "sourceDir": "/src"}
    assert again.extras[NOTEBOOK_KEY] == {
        "notebook": "sub/train.ipynb",
        "parameters": {"lr": 0.1, "name": "a b"},
        "output": "train.executed.ipynb",
    }
    assert again.virtual_cluster == "vc1" and again.task_roles[0].gpu == 1
    command = again.task_roles[0].commands[0]
    run = shlex.split(command.splitlines()[-1].split("&&", 1)[1])
    assert run[run.index("-y") + 1] == json.dumps({"lr": 0.1, "name": "a b"})  # JSON: types survive
    assert "--log-output" in run and run[run.index("-k") + 1] == "python3"


@pytest.mark.parametrize(
    ("path", "words"), [("../x.ipynb", "inside the source dir"), ("/x.ipynb", "inside"), ("x.py", "not a notebook")]
)
def test_a_notebook_outside_its_folder_or_not_a_notebook_is_refused(path: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        notebook_job(path, "/src")


def test_names() -> None:
    assert executed_name("a/b/train.ipynb") == "train.executed.ipynb"
    assert "exit 227" in papermill_command("t.ipynb", {})


@pytest.mark.parametrize(
    ("service_bin", "words"),
    [
        ("/opt/tools/bin", "/opt/tools/bin/python3 -m pip install papermill ipykernel"),  # the process runtime
        ("", "Add papermill and ipykernel to the image"),  # a container: no platform Python
    ],
)
def test_a_task_without_papermill_says_what_to_install_where(tmp_path: Path, service_bin: str, words: str) -> None:
    """The log line names the command that installs it into the Python the task looks in (a new user after
    `make lab` got only "papermill is not installed", naming the image or a setting)."""
    env = {"PATH": "/usr/bin:/bin", **({"PAI_SERVICE_BIN": service_bin} if service_bin else {})}
    done = subprocess.run(
        ["bash", "-c", papermill_command("t.ipynb", {})], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == EXIT_NO_PAPERMILL, done.stderr
    assert "papermill is not installed in this task" in done.stderr and words in done.stderr, done.stderr


def test_cli_refuses_a_notebook_outside_its_source_dir(tmp_path: Path) -> None:
    (tmp_path / "nb.ipynb").write_text("{}")
    (tmp_path / "other").mkdir()
    args = ["run-notebook", str(tmp_path / "nb.ipynb"), "--source-dir", str(tmp_path / "other")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "is not in the subpath" in result.output
