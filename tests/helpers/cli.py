"""The `pai` command as a user runs it: the installed console script, in a subprocess, against a daemon's home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PAI = [str(Path(sys.executable).with_name("pai"))]  # the installed console script


def pai(*args: str, home: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAI_JUPYTER_HOME": str(home)}
    env.pop("PAI_PROFILE", None)
    return subprocess.run([*PAI, *args], capture_output=True, text=True, env=env, input=stdin, timeout=120)
