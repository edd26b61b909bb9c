"""The environment of a task that runs on this host (the process runtime): what it gets beside its own PAI_*
variables, and where the platform's own services inside it (TensorBoard, Jupyter) find their Python."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .taskdir import SERVICE_BIN

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def host_env(env: dict[str, str]) -> dict[str, str]:
    """The task's env plus a plain system PATH, and HOME and LANG from the daemon, where the task does not set them.

    Never the daemon's own PATH: it starts with the workbench's venv, so a root task's ``pip install`` went into
    the workbench itself (and other accounts got "bad interpreter"); OpenPAI's tasks get their image's
    environment, and this host's system is the process runtime's image. The services the platform runs inside a
    task (TensorBoard, Jupyter) are the workbench's: they find its tools through ``SERVICE_BIN`` alone."""
    out = dict(env)
    out.setdefault("PATH", SYSTEM_PATH)
    for name in ("HOME", "LANG"):
        if name not in out and name in os.environ:
            out[name] = os.environ[name]
    out.setdefault(SERVICE_BIN, service_bin())
    return out


TASK_TOOLS = "PAI_JUPYTER_TASK_TOOLS"


def service_bin() -> str:
    """The bin directory of the Python environment the platform's services inside a task run from: the admin's
    ``PAI_JUPYTER_TASK_TOOLS`` (a virtualenv every account can use), else the workbench's own. The workbench's
    may be unusable by other accounts (a Python under root's 0700 home); the services then say so in their
    ``.missing`` file (``services.start_command``) and the cluster's description names the setting."""
    tools = os.environ.get(TASK_TOOLS)
    return os.path.join(tools, "bin") if tools else os.path.dirname(sys.executable)


def usable_by_others(path: str) -> bool:
    """Can any account run ``path``: every directory on the way to it (and to what it links to) world-searchable
    and the file world-executable."""
    for candidate in {path, os.path.realpath(path)}:
        p = Path(candidate)
        try:
            if not p.stat().st_mode & 0o001:
                return False
            if any(not parent.stat().st_mode & 0o001 for parent in p.parents):
                return False
        except OSError:
            return False
    return True
