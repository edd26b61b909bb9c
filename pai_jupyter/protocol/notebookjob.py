"""A notebook as a batch job: papermill runs it inside a task, with its ``parameters``-tagged cell overridden
(papermill's own injection), and writes the executed copy into the job's output as each cell ends.

The notebook travels as the Estimator's layout does (``extras["com.pai_jupyter.estimator"].sourceDir``: the
embedded cluster snapshots the folder at submit into the task's working dir), and the executed notebook is
``$PAI_OUTPUT_LOGS/<stem>.executed.ipynb``. ``extras["com.pai_jupyter.notebook"]`` says which notebook and where
its executed copy is, so the Lab and ``pai`` can find it while the job runs and after. It lives here, beside the
job model, because the CLI, the server extension and the SDK each build such a job.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import PurePosixPath
from typing import Any

from .model import DEFAULT_IMAGE_PREREQ, Job, Prerequisite, TaskRole
from .rules import ESTIMATOR_KEY

NOTEBOOK_KEY = "com.pai_jupyter.notebook"
EXIT_NO_PAPERMILL = 227  # the task's exit code when neither the image nor the task tools have papermill
DEFAULT_KERNEL = "python3"
MISSING = "[pai_jupyter] papermill is not installed in this task"
# what the log says then, and what to install where: on the process runtime (PAI_SERVICE_BIN set: the Python of
# the platform's services, the workbench's own unless the cluster's PAI_JUPYTER_TASK_TOOLS names another) ...
MISSING_HOST = (
    f"{MISSING}: it is neither on the task's PATH nor in the Python the process runtime gives the platform's tools "
    "($PAI_SERVICE_BIN). Install them there: $PAI_SERVICE_BIN/python3 -m pip install papermill ipykernel (in the "
    "workbench's own environment, make lab or pip install 'pai_jupyter[lab]' does it)"
)
# ... and in a container: the image's
MISSING_IMAGE = (
    f"{MISSING}: the job's image has no papermill on its PATH. Add papermill and ipykernel to the image "
    "(pip install papermill ipykernel), or run it on the process runtime (pai cluster start --runtime process)"
)


def executed_name(notebook: str) -> str:
    """``train.ipynb`` -> ``train.executed.ipynb`` (the file in the job's output)."""
    return PurePosixPath(notebook).stem + ".executed.ipynb"


def _with_service_bin(text: str) -> str:
    """``text`` quoted for the shell, each ``$PAI_SERVICE_BIN`` in it expanded by the task's shell."""
    return '"$PAI_SERVICE_BIN"'.join(shlex.quote(part) for part in text.split("$PAI_SERVICE_BIN"))


def papermill_command(notebook: str, parameters: dict[str, Any], kernel: str = DEFAULT_KERNEL) -> str:
    """The task's command: find papermill (the image's PATH, else the task tools' ``$PAI_SERVICE_BIN``), say
    clearly in the log when there is none (and what to install where), and run the notebook from the working dir
    into the output dir. Parameters go as JSON (valid YAML) through ``-y`` so numbers stay numbers."""
    out = executed_name(notebook)
    return "\n".join(
        [
            "PM=$(command -v papermill || true)",
            'if [ -z "$PM" ] && [ -x "${PAI_SERVICE_BIN:-/nonexistent}/papermill" ]; then '
            'PM="$PAI_SERVICE_BIN/papermill"; fi',
            'if [ -z "$PM" ]; then if [ -n "${PAI_SERVICE_BIN:-}" ]; then '
            f"echo {_with_service_bin(MISSING_HOST)} >&2; else echo {shlex.quote(MISSING_IMAGE)} >&2; fi; "
            f"exit {EXIT_NO_PAPERMILL}; fi",
            f'cd "$PAI_WORKING_DIR" && "$PM" --log-output --no-progress-bar -k {shlex.quote(kernel)} '
            f"-y {shlex.quote(json.dumps(parameters))} {shlex.quote(notebook)} "
            f'"${{PAI_OUTPUT_LOGS%/}}/"{shlex.quote(out)}',
        ]
    )


def notebook_spec(notebook: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """What ``extras[NOTEBOOK_KEY]`` holds: the notebook (relative to the working dir), its parameters and
    the executed copy's name in the job's ``logs`` output."""
    return {"notebook": notebook, "parameters": parameters, "output": executed_name(notebook)}


def job_name_for(notebook: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]", "-", PurePosixPath(notebook).stem)[:200] or "notebook"
    return f"{base}-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 4096:03x}"


def notebook_job(
    notebook: str,
    source_dir: str,
    parameters: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    image: str = "python:3.11",
    cpu: int = 1,
    gpu: int = 0,
    memory_mb: int = 2048,
    virtual_cluster: str = "default",
    kernel: str = DEFAULT_KERNEL,
    extras: dict[str, Any] | None = None,
) -> Job:
    """A one-task job that runs ``notebook`` (a path relative to ``source_dir``, a host folder the embedded
    cluster snapshots at submit) with papermill."""
    if PurePosixPath(notebook).is_absolute() or ".." in PurePosixPath(notebook).parts:
        raise ValueError(f"the notebook {notebook!r} must be a path inside the source dir")
    if not notebook.endswith(".ipynb"):
        raise ValueError(f"{notebook!r} is not a notebook (.ipynb)")
    params = dict(parameters or {})
    role = TaskRole(
        name="main", cpu=cpu, gpu=gpu, memory_mb=memory_mb, commands=[papermill_command(notebook, params, kernel)]
    )
    return Job(
        name=name or job_name_for(notebook),
        prerequisites=[Prerequisite(name=DEFAULT_IMAGE_PREREQ, type="dockerimage", uri=image)],
        task_roles=[role],
        virtual_cluster=virtual_cluster,
        extras={
            **(extras or {}),
            ESTIMATOR_KEY: {"hyperparameters": params, "sourceDir": source_dir},
            NOTEBOOK_KEY: notebook_spec(notebook, params),
        },
    )
