"""Where the embedded cluster keeps its files: everything under ``$PAI_JUPYTER_HOME/local/``."""

from __future__ import annotations

import getpass
import json
import os
from pathlib import Path
from typing import Any


def pai_home() -> Path:
    return Path(os.environ.get("PAI_JUPYTER_HOME") or "~/.pai-jupyter").expanduser()


def local_dir(home: Path | None = None) -> Path:
    return (home or pai_home()) / "local"


def runtime_file(home: Path | None = None) -> Path:
    return local_dir(home) / "runtime.json"


def os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers)
        return "user"


def write_private_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON readable by the owner only (mode 0600), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def read_runtime(home: Path | None = None) -> dict[str, Any] | None:
    try:
        return json.loads(runtime_file(home).read_text())
    except (OSError, ValueError):
        return None
