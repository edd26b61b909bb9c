"""``$PAI_JUPYTER_HOME`` (default ``~/.pai-jupyter``) and the files in it that more than the daemon reads: the
client's profiles (``clusters.yaml``) and the embedded daemon's address and token (``local/runtime.json``)."""

from __future__ import annotations

import getpass
import json
import os
from pathlib import Path
from typing import Any

from .channel import SOCKET_NAME


def pai_home() -> Path:
    return Path(os.environ.get("PAI_JUPYTER_HOME") or "~/.pai-jupyter").expanduser()


def profiles_file(home: Path | None = None) -> Path:
    """The client's cluster profiles."""
    return (home or pai_home()) / "clusters.yaml"


def local_dir(home: Path | None = None) -> Path:
    """The embedded cluster's own files."""
    return (home or pai_home()) / "local"


def runtime_file(home: Path | None = None) -> Path:
    """Where the running embedded daemon says its url, socket, token and pid (0600)."""
    return local_dir(home) / "runtime.json"


def socket_file(home: Path | None = None) -> Path:
    """The running embedded daemon's unix socket (``common/channel.py``): local clients send their tokens there."""
    return local_dir(home) / SOCKET_NAME


def read_runtime(home: Path | None = None) -> dict[str, Any] | None:
    try:
        data = json.loads(runtime_file(home).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def os_user() -> str:
    """This process's account name: the local cluster's user."""
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers)
        return "user"
