"""The Estimator's task layout (Alibaba PAI's Estimator guide): /ml/usercode, /ml/input/{config,data}, /ml/output.

A job whose ``extras`` carry ``com.pai_jupyter.estimator`` gets, once per job, a tree under its job dir:
``ml/usercode`` (a snapshot of sourceDir taken at submit; codecopy.py says what of it),
``ml/input/config/hyperparameters.json`` (JSON that keeps types: numbers stay numbers),
``ml/output/{model,checkpoints,logs}``; input channels point at the host paths given. Docker tasks see it all
under ``/ml`` through bind mounts; process tasks see the host paths.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runtime.view import Mount, TaskView
from . import codecopy

OUTPUTS = ("model", "checkpoints", "logs")
EXIT_REQUIREMENTS_FAILED = 226
REQUIREMENTS = (
    'if [ -f "$PAI_WORKING_DIR/requirements.txt" ]; then '
    'echo "[pai_jupyter] installing $PAI_WORKING_DIR/requirements.txt"; '
    'python3 -m pip install -q --disable-pip-version-check --no-input --target "$PAI_TASK_DIR/run/deps" '
    '-r "$PAI_WORKING_DIR/requirements.txt" || { echo "[pai_jupyter] installing requirements.txt failed" >&2; '
    f"exit {EXIT_REQUIREMENTS_FAILED}; }}; "
    'export PYTHONPATH="$PAI_TASK_DIR/run/deps${PYTHONPATH:+:$PYTHONPATH}"; fi'
)


def env_name(name: str) -> str:
    """``train.learning-rate`` -> ``TRAIN_LEARNING_RATE`` (Alibaba PAI's rule for PAI_HPS_ and PAI_INPUT_)."""
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def is_remote(uri: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", uri)) and not uri.startswith("file://")


def host_path(uri: str) -> Path:
    return Path(uri[len("file://") :] if uri.startswith("file://") else uri).expanduser()


@dataclass
class Layout:
    root: Path  # <job dir>/ml on the host
    spec: dict[str, Any]

    @property
    def usercode(self) -> Path:
        return self.root / "usercode"

    def output(self, name: str) -> Path:
        return self.root / "output" / name

    def code(self, skip: Sequence[Path] = ()) -> codecopy.Selection | None:
        """What of the source dir the job's code is (``codecopy``: never a cluster's home, ``skip``, or a job's
        dir; not what ignore files leave out); raises ``codecopy.CodeTooBig`` past the bound. None: no source."""
        source = self.spec.get("sourceDir")
        return codecopy.select(host_path(source), skip=skip) if source else None

    def create(self, code: codecopy.Selection | None = None) -> None:
        """Snapshot the source dir (``code``, from ``self.code()``) and write the config; run once, at submit."""
        (self.root / "input" / "config").mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            self.output(name).mkdir(parents=True, exist_ok=True)
        hps = self.spec.get("hyperparameters") or {}
        (self.root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hps, indent=2))
        if code is not None and not self.usercode.exists():
            codecopy.copy(code, self.usercode)
        self.usercode.mkdir(exist_ok=True)

    def env(self, view: TaskView) -> dict[str, str]:
        base = view.path(self.root, "/ml")
        hps = self.spec.get("hyperparameters") or {}
        env = {
            "PAI_CONFIG_DIR": f"{base}/input/config",
            "PAI_WORKING_DIR": f"{base}/usercode",
            "PAI_HPS": json.dumps(hps),
            "PAI_USER_ARGS": " ".join(f"--{k} {shlex.quote(_value(v))}" for k, v in hps.items()),
            **{f"PAI_OUTPUT_{env_name(o)}": f"{base}/output/{o}/" for o in OUTPUTS},
            **{f"PAI_HPS_{env_name(k)}": _value(v) for k, v in hps.items()},
        }
        for channel, uri in (self.spec.get("inputs") or {}).items():
            if is_remote(uri):
                env[f"PAI_INPUT_{env_name(channel)}"] = uri
                continue
            path = host_path(uri)  # a file's channel is its directory, shared whole (``mounts``)
            seen = view.path(path if path.is_dir() else path.parent, f"/ml/input/data/{channel}")
            env[f"PAI_INPUT_{env_name(channel)}"] = f"{seen}/" + ("" if path.is_dir() else path.name)
        return env

    def mounts(self, view: TaskView) -> list[Mount]:
        """What makes the paths of ``env`` true in the task (nothing where it sees the host's)."""
        out = view.share(self.usercode, "/ml/usercode") + view.share(
            self.root / "input" / "config", "/ml/input/config", True
        )
        for o in OUTPUTS:
            out += view.share(self.output(o), f"/ml/output/{o}")
        for channel, uri in (self.spec.get("inputs") or {}).items():
            if not is_remote(uri):
                path = host_path(uri)
                out += view.share(path if path.is_dir() else path.parent, f"/ml/input/data/{channel}", True)
        return out

    def work_dir(self, view: TaskView) -> str | None:
        return view.work_dir(self.usercode, "/ml/usercode")


def problems(spec: dict[str, Any]) -> list[str]:
    """Host paths the layout needs that are not there (checked at submit, so the job is refused early)."""
    out = []
    source = spec.get("sourceDir")
    if source and not host_path(source).is_dir():
        out.append(f"sourceDir {source} is not a directory")
    for channel, uri in (spec.get("inputs") or {}).items():
        if not is_remote(uri) and not host_path(uri).exists():
            out.append(f"input {channel}: {uri} does not exist")
    return out
