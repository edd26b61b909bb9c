"""Checkpoints that survive preemption, for any framework (docs/checkpoint.md).

The platform's contract, in every task on every runtime:

- ``PAI_CHECKPOINT_DIR``: the job's checkpoint directory, kept across attempts: a preempted job's next attempt finds
  what the last one saved there.
- ``PAI_PREEMPT_SIGNAL`` (``TERM``) and ``PAI_PREEMPT_GRACE_SECONDS`` (30): a preempted task gets that signal, then
  SIGKILL once the grace is over.

This module keeps to that contract with the standard library only (a task's Python may have nothing else):

- ``save(write, step)`` writes a checkpoint atomically: to a temporary file in the same directory, flushed and
  fsynced, renamed to ``ckpt-<step>``, and only then is the ``latest`` pointer replaced the same way (and the
  directory fsynced). A SIGKILL at any instant leaves ``latest`` naming a complete checkpoint (or none).
- ``load(read)`` / ``latest()`` find it again: the pointer, else the newest complete ``ckpt-*``.
- ``preempting()``: whether the preemption signal arrived. The handler only sets a flag; the checkpoint is written
  by the training loop at its next step (work in a signal handler is how checkpoints get corrupted).

Plain PyTorch::

    from pai_jupyter import checkpoint

    found = checkpoint.load(torch.load)
    start = found[0] + 1 if found else 0
    if found:
        model.load_state_dict(found[1]["model"])
    for step in range(start, steps):
        train_one_step()
        if step % 100 == 0 or checkpoint.preempting():
            checkpoint.save(lambda p: torch.save({"model": model.state_dict()}, p), step)
        if checkpoint.preempting():
            break  # the next attempt resumes from here

NumPy: ``checkpoint.save(lambda p: np.save(p, weights, allow_pickle=False), step)`` and
``checkpoint.load(lambda p: np.load(p, allow_pickle=False))``. Lightning: ``lightning_callback()``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
DIR_VAR = "PAI_CHECKPOINT_DIR"
GRACE_VAR = "PAI_PREEMPT_GRACE_SECONDS"
SIGNAL_VAR = "PAI_PREEMPT_SIGNAL"
POINTER = "latest"
NAME = re.compile(r"^ckpt-(\d{12})$")

_flag = threading.Event()
_signalled_at: float | None = None
_watched = False


def directory() -> Path:
    """``$PAI_CHECKPOINT_DIR``, made if missing; outside the platform ``./checkpoints``."""
    path = Path(os.environ.get(DIR_VAR) or "checkpoints")
    path.mkdir(parents=True, exist_ok=True)
    return path


def grace_seconds() -> float:
    """How long a preempted task has between its signal and SIGKILL."""
    try:
        return float(os.environ.get(GRACE_VAR, "30"))
    except ValueError:
        return 30.0


def _signal() -> signal.Signals:
    name = os.environ.get(SIGNAL_VAR, "TERM").upper().removeprefix("SIG")
    return signal.Signals[f"SIG{name}"] if f"SIG{name}" in signal.Signals.__members__ else signal.SIGTERM


def watch() -> None:
    """Listen for the preemption signal (once; from the main thread, as Python requires). The handler sets a flag
    and calls a Python handler that was there before it; nothing else."""
    global _watched
    if _watched or threading.current_thread() is not threading.main_thread():
        return
    sig = _signal()
    before = signal.getsignal(sig)

    def handler(signum: int, frame: Any) -> None:
        global _signalled_at
        if _signalled_at is None:
            _signalled_at = time.monotonic()
        _flag.set()
        if callable(before):
            before(signum, frame)

    signal.signal(sig, handler)
    _watched = True


def preempting() -> bool:
    """Whether this task got its preemption signal: save now and stop; the job's next attempt resumes."""
    watch()
    return _flag.is_set()


def deadline() -> float | None:
    """The ``time.monotonic()`` by which the task is killed, once the signal came (None before)."""
    return None if _signalled_at is None else _signalled_at + grace_seconds()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write`` a temporary file beside ``path``, fsync it, rename it over ``path``."""
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}-{threading.get_ident()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def save(write: Callable[[Path], None] | bytes, step: int, *, keep: int = 2) -> Path:
    """Save the checkpoint of ``step`` (a callable writing the file it is given, or the bytes themselves) and point
    ``latest`` at it; keep the newest ``keep``. Returns its path."""
    if step < 0:
        raise ValueError("step must be 0 or more")
    watch()
    where = directory()
    path = where / f"ckpt-{step:012d}"
    data = write

    def writer(p: Path) -> None:
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            data(p)

    def pointer(p: Path) -> None:
        p.write_text(path.name)

    _write_atomically(path, writer)
    _write_atomically(where / POINTER, pointer)
    _fsync_dir(where)
    for old in _complete(where)[:-keep] if keep > 0 else []:
        if old[1] != path:
            with contextlib.suppress(FileNotFoundError):
                old[1].unlink()
    return path


def _complete(where: Path) -> list[tuple[int, Path]]:
    """The complete checkpoints (renamed into place; temporary files never count), oldest first."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(where):
            m = NAME.match(entry.name)
            if m and entry.is_file(follow_symlinks=False):
                found.append((int(m.group(1)), Path(entry.path)))
    return sorted(found)


def latest() -> tuple[int, Path] | None:
    """The latest checkpoint (step, path): the one ``latest`` names, else the newest complete one; never through a
    link planted in the directory."""
    where = directory()
    pointer = where / POINTER
    try:
        fd = os.open(pointer, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as f:
            name = f.read(64).strip()
        m = NAME.match(name)
        if m and (where / name).is_file() and not (where / name).is_symlink():
            return int(m.group(1)), where / name
    except OSError:
        pass
    complete = _complete(where)
    return complete[-1] if complete else None


def load(read: Callable[[Path], T] | None = None) -> tuple[int, T | bytes] | None:
    """The latest checkpoint's step and content (``read(path)``, else its bytes), or None when there is none."""
    found = latest()
    if found is None:
        return None
    step, path = found
    return step, (read(path) if read is not None else path.read_bytes())


def resume_path() -> str | None:
    """The latest checkpoint's path, for a framework that loads it itself (Lightning's ``ckpt_path=``)."""
    found = latest()
    return str(found[1]) if found else None


def lightning_callback(every_n_steps: int = 100) -> Any:
    """A Lightning callback that saves through ``save`` every ``every_n_steps`` and at once when preempted (then
    stops the trainer); resume with ``trainer.fit(model, ckpt_path=checkpoint.resume_path())``."""
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError:
            raise ImportError("lightning_callback needs lightning (pip install lightning)") from None

    class PaiCheckpoint(Callback):  # type: ignore[misc, valid-type]
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            step = int(trainer.global_step)
            if step and (step % every_n_steps == 0 or preempting()):
                save(lambda p: trainer.save_checkpoint(str(p)), step)
            if preempting():
                trainer.should_stop = True

    watch()
    return PaiCheckpoint()
