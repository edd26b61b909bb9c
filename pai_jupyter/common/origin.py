"""Where a job came from: the notebook and cell that submitted it, the git state and environment lock of its code.

The submitting side gathers it (in the user's own process: git runs there, never in the daemon, which does not
look into a folder a user can write) and sends it beside the job, in the ``X-Pai-Origin`` header of the
submission, so the stored document stays as the user wrote it. The embedded cluster turns it into the job's MLflow
run tags (docs/tracking.md); an OpenPAI server ignores the header. Every value is bounded; none is trusted for
anything but those tags.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

HEADER = "X-Pai-Origin"
VIA = ("magic", "form", "lab", "cli", "sdk", "notebook", "sweep")  # what submitted it
LOCK_FILES = ("uv.lock", "poetry.lock", "Pipfile.lock", "pixi.lock", "conda-lock.yml", "requirements.txt")
MAX_CELL = 4000  # characters of the cell kept (MLflow takes 8000 per tag value)
MAX_VALUE = 1000
GIT_TIMEOUT_S = 5.0


def git_state(folder: Path) -> dict[str, Any] | None:
    """The commit checked out in ``folder``'s repository and whether tracked files differ from it; None outside a
    repository (or without git). Hooks and the file-system monitor are off: only git's own code runs."""
    safe = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.untrackedCache=false"]
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *safe, "-C", str(folder), *args],
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                env=env,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status)} if status is not None else {"commit": commit}


def env_lock(folder: Path) -> str | None:
    """``<lock file>:sha256:<hex>`` of the first environment lock file in ``folder`` (uv, poetry, pipenv, pixi,
    conda-lock, else requirements.txt); None when there is none."""
    for name in LOCK_FILES:
        path = folder / name
        try:
            if path.is_file() and path.stat().st_size <= 64 << 20:
                return f"{name}:sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"
        except OSError:
            continue
    return None


def gather(
    via: str, *, notebook: str | None = None, cell: str | None = None, code: Path | None = None
) -> dict[str, Any]:
    """The origin of a submission ``via`` one of VIA: the notebook (its path as Jupyter names it) and cell, and of
    the code folder ``code`` (default: the notebook's folder, else none) its git state and environment lock."""
    found: dict[str, Any] = {"via": via}
    if notebook:
        found["notebook"] = notebook
    if cell:
        found["cell"] = cell
    folder = code if code is not None else (Path(notebook).parent if notebook else None)
    if folder is not None and folder.is_dir():
        if (state := git_state(folder)) is not None:
            found["git"] = state
        if (lock := env_lock(folder)) is not None:
            found["envLock"] = lock
    return found


def kernel_notebook() -> str | None:
    """The notebook of the kernel this runs in (Jupyter Server gives its kernels ``JPY_SESSION_NAME``)."""
    name = os.environ.get("JPY_SESSION_NAME")
    return name if name and name.endswith(".ipynb") else None


def encode(origin: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(clean(origin), separators=(",", ":")).encode()).decode()


def decode(header: str | None) -> dict[str, Any]:
    """What a submission's ``X-Pai-Origin`` says, bounded; {} for none or for one that is not ours."""
    if not header or len(header) > 16 * 1024:
        return {}
    try:
        raw = json.loads(base64.urlsafe_b64decode(header.encode()))
    except (ValueError, binascii.Error):
        return {}
    return clean(raw) if isinstance(raw, dict) else {}


def clean(raw: dict[str, Any]) -> dict[str, Any]:
    """Only the known keys, each of its type and bounded."""
    out: dict[str, Any] = {}
    if raw.get("via") in VIA:
        out["via"] = raw["via"]
    for key, bound in (("notebook", MAX_VALUE), ("cell", MAX_CELL), ("envLock", MAX_VALUE)):
        if isinstance(raw.get(key), str) and raw[key]:
            out[key] = raw[key][:bound]
    git = raw.get("git")
    if isinstance(git, dict) and isinstance(git.get("commit"), str):
        out["git"] = {"commit": git["commit"][:64]}
        if isinstance(git.get("dirty"), bool):
            out["git"]["dirty"] = git["dirty"]
    return out
