"""What of a source folder becomes a job's code (the Estimator's and a notebook job's ``/ml/usercode``).

The folder is often the user's home (a notebook in ``~``, the cluster's home at ``~/.pai-jupyter``), so a plain
recursive copy took the cluster's home along, and with it the new job's own directory, copying itself until the
path was too long. What is copied instead:

- never a cluster's home (the daemon's own, wherever it is, and any folder holding one: ``local/state.db``), a
  job's directory (``user~name`` holding ``output/logs``) or a VCS's folder (``.git``, ``.hg``, ``.svn``);
- by default not virtualenvs (any folder with ``pyvenv.cfg``), conda environments, ``node_modules`` and caches;
  a ``!name/`` line in an ignore file takes one of these back;
- not what ``.gitignore`` and ``.paiignore`` files (git's syntax, in the folder or below it; ``.paiignore``
  read after ``.gitignore``, so it can take back what git ignores) leave out;
- at most ``limit_mb`` (``PAI_JUPYTER_CODE_LIMIT_MB`` of the daemon, default 1024) in at most ``MAX_FILES``
  files: a larger selection is refused at submit with its biggest entries named.

Symlinks are copied as links (never followed); sockets, fifos and devices are left out.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

IGNORE_FILES = (".gitignore", ".paiignore")
NEVER = frozenset((".git", ".hg", ".svn"))
DEFAULT_SKIP = frozenset(
    ("node_modules", "__pycache__", ".ipynb_checkpoints", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox")
)
LIMIT_ENV = "PAI_JUPYTER_CODE_LIMIT_MB"
DEFAULT_LIMIT_MB = 1024
MAX_FILES = 50_000
IGNORE_FILE_BYTES = 256 * 1024  # an ignore file larger than this is read this far


class CodeTooBig(ValueError):
    """The selection is over the size or file bound; the message names its biggest entries and what to do."""


def limit_mb() -> int:
    """The daemon's bound on one job's code (``PAI_JUPYTER_CODE_LIMIT_MB``)."""
    try:
        return max(int(os.environ.get(LIMIT_ENV) or DEFAULT_LIMIT_MB), 1)
    except ValueError:
        return DEFAULT_LIMIT_MB


def human(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # (not reached)


@dataclass
class Selection:
    """The entries to copy, relative to ``root`` (posix), parents before children."""

    root: Path
    dirs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # regular files and symlinks
    size: int = 0
    left_out: list[str] = field(default_factory=list)  # a cluster's home or a job's dir: "name/ (why)"

    def describe(self) -> str:
        """One line for the job's events: what was copied, and what was left out as never the job's code."""
        said = f"copied {len(self.files)} files ({human(self.size)}) of {self.root} as the job's code"
        if self.left_out:
            said += "; left out " + ", ".join(self.left_out[:5]) + (" and more" if len(self.left_out) > 5 else "")
        return said


def _never(path: Path, name: str, skip: Sequence[Path]) -> str | None:
    """Why a directory is never part of a job's code, or None."""
    if name in NEVER:
        return "version control"
    try:
        st = path.stat()
    except OSError:
        return None
    for other in skip:
        try:
            if os.path.samestat(st, other.stat()):
                return "the cluster's home"
        except OSError:
            continue
    local = path / "local"
    if (local / "state.db").exists() or (local / "daemon.lock").exists():
        return "a cluster's home"
    if "~" in name and (path / "output" / "logs").is_dir():
        return "a job's directory"
    return None


def _by_default(path: Path, name: str) -> bool:
    """Left out unless an ignore file takes it back: environments, dependencies, caches."""
    return name in DEFAULT_SKIP or (path / "pyvenv.cfg").is_file() or (path / "conda-meta").is_dir()


def _spec(directory: Path) -> pathspec.GitIgnoreSpec | None:
    lines: list[str] = []
    for name in IGNORE_FILES:
        try:
            with open(directory / name, "rb") as f:
                lines += f.read(IGNORE_FILE_BYTES).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _ignored(specs: list[tuple[str, pathspec.GitIgnoreSpec]], rel: str, is_dir: bool) -> bool | None:
    """What the ignore files say of ``rel``: True (ignored), False (taken back by a ``!`` line), None (nothing);
    a deeper folder's file decides over its parents', as in git."""
    said = None
    for base, spec in specs:
        sub = rel[len(base) + 1 :] if base else rel
        result = spec.check_file(sub + "/" if is_dir else sub)
        if result.include is not None:
            said = result.include
    return said


def select(root: Path, *, skip: Sequence[Path] = (), limit: int | None = None) -> Selection:
    """The entries of ``root`` that make a job's code; ``skip``: cluster homes to leave out (the daemon's own).
    Raises CodeTooBig past the bounds."""
    root = Path(root)
    max_bytes = (limit if limit is not None else limit_mb()) * 1024 * 1024
    sel = Selection(root)
    tops: Counter[str] = Counter()  # bytes per top-level entry
    files: Counter[str] = Counter()  # files per top-level entry
    counted, cut = 0, False
    stack: list[tuple[Path, str, list[tuple[str, pathspec.GitIgnoreSpec]]]] = [(root, "", [])]
    while stack:
        directory, rel_dir, specs = stack.pop()
        own = _spec(directory)
        specs = [*specs, (rel_dir, own)] if own is not None else specs
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            top = rel.split("/", 1)[0]
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                path = Path(entry.path)
                why = _never(path, entry.name, skip)
                if why is not None:
                    if entry.name not in NEVER:  # (a VCS's folder is expected to stay behind)
                        sel.left_out.append(f"{rel}/ ({why})")
                    continue
                said = _ignored(specs, rel, True)
                if said or (said is None and _by_default(path, entry.name)):
                    continue
                sel.dirs.append(rel)
                subdirs.append((path, rel, specs))
                continue
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) or _ignored(specs, rel, False):
                continue
            sel.files.append(rel)
            size = st.st_size if stat.S_ISREG(st.st_mode) else 0
            sel.size += size
            tops[top + ("/" if "/" in rel else "")] += size
            files[top + ("/" if "/" in rel else "")] += 1
            counted += 1
            if counted > MAX_FILES * 4 or sel.size > max_bytes * 4:  # far past a bound: stop counting
                stack.clear()
                cut = True
                break
        stack.extend(reversed(subdirs))
    if sel.size > max_bytes or len(sel.files) > MAX_FILES:
        least = "at least " if cut else ""
        if sel.size > max_bytes:
            over = f"{least}{human(sel.size)}, over the limit of {human(max_bytes)} ({LIMIT_ENV} of the cluster)"
            biggest = [f"{name} ({human(n)})" for name, n in tops.most_common(5) if n]
        else:
            over = f"{least}{len(sel.files)} files, over the limit of {MAX_FILES}"
            biggest = [f"{name} ({n} file{'s' if n != 1 else ''})" for name, n in files.most_common(5)]
        raise CodeTooBig(
            f"the source folder {root} is too big to copy as the job's code: {over}; the biggest entries: "
            f"{', '.join(biggest)}. Leave them out with a .paiignore in {root} (git's syntax, e.g. 'data/'), "
            "or give a smaller folder"
        )
    return sel


def copy(sel: Selection, dest: Path) -> None:
    """Copy the selection into ``dest`` (made); links stay links."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel in sel.dirs:
        (dest / rel).mkdir(exist_ok=True)
    for rel in sel.files:
        source = sel.root / rel
        if source.is_symlink():
            os.symlink(os.readlink(source), dest / rel)
        else:
            shutil.copy2(source, dest / rel, follow_symlinks=False)
