"""The Estimator SDK (as Alibaba PAI's): configure a job once, ``fit(inputs)`` to run it, ``model_data()`` after.

On the embedded cluster the task sees Alibaba PAI's layout: the source dir at ``PAI_WORKING_DIR``
(``/ml/usercode`` in containers; its requirements.txt installed first), hyperparameters in
``$PAI_CONFIG_DIR/hyperparameters.json`` (JSON keeping types), ``PAI_HPS_<NAME>``, ``PAI_HPS``,
``PAI_USER_ARGS``, inputs in ``PAI_INPUT_<CHANNEL>`` (a file channel points at the file, a directory channel
at the directory) and outputs in ``PAI_OUTPUT_MODEL`` / ``PAI_OUTPUT_CHECKPOINTS`` / ``PAI_OUTPUT_LOGS``.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from ..client import Client, JobDetail
from ..client.profiles import LOCAL
from ..common.origin import gather, kernel_notebook
from ..common.states import JobState
from ..protocol import Job, Prerequisite, TaskRole
from ..protocol.model import DEFAULT_IMAGE_PREREQ
from ..protocol.notebookjob import NOTEBOOK_KEY, notebook_spec, papermill_command
from ..protocol.rules import ESTIMATOR_KEY, MAX_RUN_TIME_KEY

DEFAULT_IMAGE = "python:3.11-slim"


def _env_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


class Estimator:
    """A training job template. ``instance_type`` is ``"local"`` (the embedded cluster) or a profile name.

    ``entry_point`` instead of ``command``: a notebook (``train.ipynb``: papermill runs it, the hyperparameters
    are its parameters, the executed copy lands in ``tensorboard()``'s dir) or a script in ``source_dir``
    (default: the entry point's folder)."""

    def __init__(
        self,
        command: str | None = None,
        source_dir: str | Path | None = None,
        image_uri: str = DEFAULT_IMAGE,
        *,
        instance_type: str = LOCAL,
        instance_count: int = 1,
        hyperparameters: dict[str, Any] | None = None,
        base_job_name: str | None = None,
        cpu: int = 1,
        gpu: int = 0,
        memory: int = 2048,
        max_run_time_minutes: float | None = None,
        client: Client | None = None,
        entry_point: str | None = None,
    ):
        if source_dir is not None and not Path(source_dir).expanduser().is_dir():
            raise ValueError(f"source_dir {source_dir} is not a directory")
        if (command is None) == (entry_point is None):
            raise ValueError("give a command or an entry_point (a notebook or a script in source_dir), not both")
        if entry_point is not None:
            if source_dir is None:
                source_dir = Path(entry_point).expanduser().resolve().parent
                entry_point = Path(entry_point).name
            if not (Path(source_dir).expanduser() / entry_point).is_file():
                raise ValueError(f"entry_point {entry_point} is not a file in {source_dir}")
        self.command = command
        self.entry_point = entry_point
        self.source_dir = Path(source_dir).expanduser().resolve() if source_dir is not None else None
        self.image_uri = image_uri
        self.instance_type = instance_type
        self.instance_count = instance_count
        self.hyperparameters = dict(hyperparameters or {})
        self.base_job_name = base_job_name or (self.source_dir.name if self.source_dir else "estimator")
        self.cpu, self.gpu, self.memory = cpu, gpu, memory
        self.max_run_time_minutes = max_run_time_minutes
        self._client = client
        self._local: bool | None = None
        self.job: str | None = None  # the id (user~name) of the last fit

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.instance_type)
        return self._client

    @property
    def is_local(self) -> bool:
        """True on an embedded cluster (which lays out /ml for us), whatever the profile is called."""
        if self._local is None:
            self._local = self.client.locality().embedded
        return self._local

    def _job_name(self) -> str:
        base = re.sub(r"[^A-Za-z0-9_-]", "-", self.base_job_name)[:200] or "estimator"
        return f"{base}-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 4096:03x}"

    def build_job(self, inputs: dict[str, str | Path] | None = None, job_name: str | None = None) -> Job:
        """The job fit() submits (handy to inspect with ``.to_yaml()``)."""
        resolved = {
            k: str(Path(v).expanduser().resolve()) if self.is_local and "://" not in str(v) else str(v)
            for k, v in (inputs or {}).items()
        }
        extras: dict[str, Any] = {}
        command = self._command()
        if self.is_local:
            spec: dict[str, Any] = {"hyperparameters": self.hyperparameters, "inputs": resolved}
            if self.source_dir is not None:
                spec["sourceDir"] = str(self.source_dir)
            extras[ESTIMATOR_KEY] = spec
            if self.entry_point is not None and self.entry_point.endswith(".ipynb"):
                extras[NOTEBOOK_KEY] = notebook_spec(self.entry_point, self.hyperparameters)
        else:  # a remote OpenPAI knows nothing of the layout: pass what can travel as environment
            if self.source_dir is not None:
                raise ValueError(
                    "source_dir needs the embedded cluster; on a remote OpenPAI put the code in the "
                    "image or fetch it in the command (e.g. git clone)"
                )
            exports = [f"export PAI_HPS_{_env_name(k)}={shlex.quote(str(v))}" for k, v in self.hyperparameters.items()]
            exports += [f"export PAI_INPUT_{_env_name(k)}={shlex.quote(v)}" for k, v in resolved.items()]
            command = "\n".join([*exports, command])
        if self.max_run_time_minutes:
            extras[MAX_RUN_TIME_KEY] = self.max_run_time_minutes
        role = TaskRole(
            name="worker",
            instances=self.instance_count,
            cpu=self.cpu,
            gpu=self.gpu,
            memory_mb=self.memory,
            commands=[command],
        )
        image = Prerequisite(name=DEFAULT_IMAGE_PREREQ, type="dockerimage", uri=self.image_uri)  # as Job(image=)
        return Job(
            name=job_name or self._job_name(),
            prerequisites=[image],
            task_roles=[role],
            extras=extras,
            parameters={k: v for k, v in self.hyperparameters.items() if re.match(r"^\w+$", k)},
        )

    def _command(self) -> str:
        """The command, or the entry point's: papermill for a notebook (hyperparameters as its parameters),
        ``python3`` with ``$PAI_USER_ARGS`` for a script."""
        if self.command is not None:
            return self.command
        assert self.entry_point is not None
        if self.entry_point.endswith(".ipynb"):
            return papermill_command(self.entry_point, self.hyperparameters)
        return f'cd "$PAI_WORKING_DIR" && python3 {shlex.quote(self.entry_point)} $PAI_USER_ARGS'

    def fit(
        self,
        inputs: dict[str, str | Path] | None = None,
        *,
        wait: bool = True,
        logs: bool = True,
        job_name: str | None = None,
    ) -> JobDetail | str:
        """Submit the job; with ``wait`` block until it ends (streaming logs with ``logs``) and return its detail."""
        job = self.build_job(inputs, job_name)
        code = self.source_dir or Path.cwd()
        self.job = self.client.submit(job, origin=gather("sdk", notebook=kernel_notebook(), code=code))
        if not wait:
            return self.job
        if logs:
            for chunk in self.client.follow(self.job):
                sys.stdout.write(chunk)
                sys.stdout.flush()
        detail = self.client.wait(self.job)
        if detail.state != JobState.SUCCEEDED:
            raise RuntimeError(f"{self.job} ended {detail.state}: {detail.job_status.app_exit_diagnostics}")
        return detail

    def _require_job(self) -> str:
        if self.job is None:
            raise RuntimeError("call fit() first")
        return self.job

    def _output(self, name: str) -> str:
        detail = self.client.detail(self._require_job())
        dirs = (detail.job_status.model_extra or {}).get("outputDirs") or {}
        if name in dirs:
            return dirs[name]
        raise RuntimeError(f"{self.job} has no {name} output on this cluster ({self.client.profile.name})")

    def model_data(self) -> str:
        """Where the model the job wrote lives: a local path on the embedded cluster."""
        return self._output("model")

    def checkpoints_data(self) -> str:
        return self._output("checkpoints")

    def tensorboard(self) -> str:
        """The job's TensorBoard log dir (PAI_OUTPUT_LOGS): point ``%tensorboard --logdir`` at it."""
        return self._output("logs")
