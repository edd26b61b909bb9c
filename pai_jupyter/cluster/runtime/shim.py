"""Which shim the process runtime runs: the C shim (``shim.c``), built once per machine, or ``shim.sh``.

Both keep the same files in the task directory, so recovery and the logs do not care which one ran a task. The
C shim is one small exec per task where shim.sh costs five (two shells, a subshell, two tees); it is compiled
with the machine's C compiler the first time a runtime needs it and kept in the user's cache, named by a hash
of its source, so an upgrade rebuilds it and concurrent daemons share one copy. Without a compiler (or with
``PAI_JUPYTER_SHIM=sh``) the runtime uses shim.sh and says so in ``describe()``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SHIM_SH = Path(__file__).with_name("shim.sh")
SHIM_C = Path(__file__).with_name("shim.c")
SHIM_ENV = "PAI_JUPYTER_SHIM"  # "sh" forces shim.sh, "c" requires the C shim, unset/"auto" prefers C
SHELL_ENV_PREFIX = "PAI_JUPYTER_SHELL_ENV_"  # how the shell's environment reaches ``pai-shim --exec`` (shim.c)


@dataclass(frozen=True)
class Shim:
    """The argv prefix that runs the shim (the task dir is appended) and what it is, for ``describe()``."""

    argv: tuple[str, ...]
    kind: str  # "c" or "sh"
    note: str = ""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pai_jupyter"


def build_c_shim(dest_dir: Path | None = None) -> Path:
    """The compiled C shim, built now unless this machine already has this version; raises RuntimeError."""
    source = SHIM_C.read_bytes()
    key = hashlib.sha256(source + platform.machine().encode()).hexdigest()[:16]
    dest_dir = dest_dir or cache_dir()
    binary = dest_dir / f"pai-shim-{key}"
    if os.access(binary, os.X_OK):
        return binary
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".pai-shim-", dir=dest_dir)
        os.close(fd)
    except OSError as exc:
        raise RuntimeError(f"cannot write the shim into {dest_dir}: {exc}") from exc
    try:
        done = subprocess.run([cc, "-O2", "-o", tmp, str(SHIM_C)], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"{cc} failed to build the shim: {done.stderr.strip()[-500:]}")
        os.chmod(tmp, 0o755)
        os.replace(tmp, binary)  # atomic: a concurrent builder's copy is identical
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"building the shim with {cc} failed: {exc}") from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return binary


def choose_shim() -> Shim:
    """The C shim where it can be built (unless PAI_JUPYTER_SHIM=sh), else shim.sh with the reason."""
    wanted = (os.environ.get(SHIM_ENV) or "auto").lower()
    sh = Shim(("/bin/sh", str(SHIM_SH)), "sh")
    if wanted == "sh":
        return Shim(sh.argv, "sh", f"{SHIM_ENV}=sh")
    try:
        return Shim((str(build_c_shim()),), "c")
    except RuntimeError as exc:
        if wanted == "c":
            raise
        log.warning("using the sh shim (slower task starts): %s", exc)
        return Shim(sh.argv, "sh", str(exc))


def shell_in_task(
    shim_path: str, socket: str, shim: tuple[int, int], cwd: str | None, argv: list[str], env: dict[str, str]
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of ``pai-shim --exec``: ``argv`` run by the task's C shim ``shim`` (its pid and start
    ticks) in the task's account, cgroups and process tree (see shim.c), reached through its ``socket``. The
    client may run as root: ``env`` reaches it wrapped, one ``SHELL_ENV_PREFIX<n>=KEY=VALUE`` each, so none of it
    (LD_PRELOAD, say) acts on the client; only the shell gets it."""
    wrapped = {f"{SHELL_ENV_PREFIX}{i}": f"{k}={v}" for i, (k, v) in enumerate(env.items())}
    return [shim_path, "--exec", socket, f"{shim[0]}:{shim[1]}", cwd or "", *argv], wrapped
