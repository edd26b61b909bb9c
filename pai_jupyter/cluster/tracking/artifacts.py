"""An ended job's outputs as its run's artifacts: what its ``model`` and ``logs`` output directories hold (an
Estimator's or a notebook job's: the trained model, the executed notebook, TensorBoard's event files), up to
``PAI_JUPYTER_MLFLOW_ARTIFACTS_MB`` (default 100; 0 uploads nothing) and ``MAX_FILES`` files, under
``outputs/<model|logs>/`` in the run. What did not fit is named in the run's ``pai.artifacts`` tag.

A task wrote those directories (``ml/`` and all below it are its account's), and the daemon may be root: they are
walked and read as ``safeio`` reads a task's files, beneath the job's own directory (root's) without following any
symlink on the way, regular files only (a FIFO or device is skipped, never opened), each bounded by the size it had
when it was listed.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...common import safeio

log = logging.getLogger("pai_jupyter.cluster")
ARTIFACTS_ENV = "PAI_JUPYTER_MLFLOW_ARTIFACTS_MB"
DEFAULT_MB = 100
MAX_FILES = 1000
UPLOADED = ("model", "logs")  # the outputs uploaded (checkpoints stay in the job's directory: they are big)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def budget_bytes() -> int:
    raw = os.environ.get(ARTIFACTS_ENV, "")
    try:
        return max(0, int(float(raw) * (1 << 20))) if raw else DEFAULT_MB << 20
    except ValueError:
        log.warning("%s=%r is not a number of MB; uploading up to %d MB", ARTIFACTS_ENV, raw, DEFAULT_MB)
        return DEFAULT_MB << 20


@dataclass
class Listing:
    """The files to upload ((output, path inside it, size)) and what was left out, and why."""

    files: list[tuple[str, str, int]] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    total: int = 0


def _entries(base: Path, rel: str) -> Iterator[tuple[str, os.stat_result]]:
    """(path under ``base``, lstat) of each entry beneath ``base/rel``, each directory opened beneath ``base``
    following no link, depth first."""
    fd = safeio.open_beneath(base, rel, _DIR_FLAGS)
    try:
        names = sorted(os.listdir(fd))
        found = [(n, os.stat(n, dir_fd=fd, follow_symlinks=False)) for n in names]
    finally:
        os.close(fd)
    for name, st in found:
        path = f"{rel}/{name}"
        yield path, st
        if stat.S_ISDIR(st.st_mode):
            yield from _entries(base, path)


def listing(base: Path, outputs: dict[str, str], budget: int) -> Listing:
    """What of ``outputs`` (output name -> its directory beneath the job's directory ``base``) fits in ``budget``
    bytes and MAX_FILES files; each file as (output name, its path beneath ``base``, its size)."""
    out = Listing()
    for name, directory in outputs.items():
        try:
            entries = list(_entries(base, directory))
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                out.left.append(f"{name}/ ({exc.strerror})")
            continue
        for path, st in entries:
            shown = f"{name}/{path[len(directory) + 1 :]}"
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                out.left.append(f"{shown} (not a regular file)")
            elif len(out.files) >= MAX_FILES:
                out.left.append(f"{shown} (past {MAX_FILES} files)")
            elif out.total + st.st_size > budget:
                out.left.append(f"{shown} ({st.st_size >> 20} MB: past {budget >> 20} MB)")
            else:
                out.files.append((name, path, st.st_size))
                out.total += st.st_size
    return out


def read(base: Path, path: str, size: int) -> bytes:
    """The file as listed: opened beneath ``base`` without following anything, at most ``size`` bytes."""
    with safeio.open_regular(base, path) as (fd, _st):
        chunks, left = [], size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def summary(found: Listing) -> str:
    said = f"{len(found.files)} files, {found.total / (1 << 20):.1f} MB uploaded"
    if found.left:
        more = f" and {len(found.left) - 5} more" if len(found.left) > 5 else ""
        said += f"; left out: {', '.join(found.left[:5])}{more}"
    return said[:5000]
