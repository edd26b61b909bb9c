"""Checkpoints that survive preemption, for any framework (docs/checkpoint.md).

The platform's contract, in every task on every runtime:

- ``PAI_CHECKPOINT_DIR``: the job's checkpoint directory, kept across attempts: a preempted job's next attempt finds
  what the last one saved there (outside the platform: ``./checkpoints``).
- ``PAI_PREEMPT_SIGNAL`` (``TERM``) and ``PAI_PREEMPT_GRACE_SECONDS`` (30): a preempted task gets that signal, then
  SIGKILL once the grace is over; the job is queued again and its next attempt resumes from ``latest``.

This module keeps to that contract with the standard library only (a task's Python may have nothing else):

- ``save(write, step)`` writes a checkpoint atomically: to a temporary name in the same directory, fsynced, renamed
  to ``ckpt-<step>``, and only then is the ``latest`` pointer replaced the same way (the directory fsynced after
  each rename). A SIGKILL at any instant leaves ``latest`` naming a complete checkpoint (or none). A checkpoint is a
  file or a directory (``lambda p: model.save_pretrained(p)``); the newest ``keep`` are kept.
- ``load(read)`` / ``latest()`` find it again: the pointer, else the newest complete ``ckpt-*``; temporary files
  never count and a link planted in the directory is never followed.
- ``preempting()``: "am I being preempted?" -- whether the preemption signal arrived. Its handler only sets a flag;
  the training loop saves at its next step and stops (work inside a signal handler is how checkpoints get torn).
  ``deadline()`` is the ``time.monotonic()`` of the SIGKILL once the signal came.

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

NumPy (``np.save`` given a file object, so it adds no ``.npy`` to the name)::

    def write(p):
        with open(p, "wb") as f:
            np.save(f, weights, allow_pickle=False)

    checkpoint.save(write, step)
    found = checkpoint.load(lambda p: np.load(p, allow_pickle=False))

Lightning: ``Trainer(callbacks=[checkpoint.lightning_callback()])``, then
``trainer.fit(model, ckpt_path=checkpoint.resume_path())``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
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
TEMP = ".tmp-"  # what a save writes before its rename: never a checkpoint
NAME = re.compile(r"^ckpt-(\d{12})$")
STALE_TEMP_S = 600.0  # a temporary left this long (by a save that was killed) is removed by the next save

_preempted = False  # set by the signal handler, and nothing else
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


def preempt_signal() -> signal.Signals:
    """The preemption signal ``$PAI_PREEMPT_SIGNAL`` names (``TERM``, ``USR1``, ...; SIGTERM if unknown)."""
    name = "SIG" + os.environ.get(SIGNAL_VAR, "TERM").strip().upper().removeprefix("SIG")
    return signal.Signals[name] if name in signal.Signals.__members__ else signal.SIGTERM


def watch() -> None:
    """Listen for the preemption signal (once, from the main thread, as Python requires; ``preempting()`` and
    ``save()`` call it). The handler sets a flag and calls a Python handler that was there before it, except
    Python's own SIGINT one (its KeyboardInterrupt would abort the very save the signal asks for)."""
    global _watched
    if _watched or threading.current_thread() is not threading.main_thread():
        return
    sig = preempt_signal()
    before = signal.getsignal(sig)
    chained = before if callable(before) and before is not signal.default_int_handler else None

    def handler(signum: int, frame: Any) -> None:
        global _preempted, _signalled_at
        if _signalled_at is None:
            _signalled_at = time.monotonic()
        _preempted = True
        if chained is not None:
            chained(signum, frame)

    signal.signal(sig, handler)
    _watched = True


def preempting() -> bool:
    """Whether this task got its preemption signal: save now and stop; the job's next attempt resumes."""
    watch()
    return _preempted


def deadline() -> float | None:
    """The ``time.monotonic()`` by which the task is killed, once the signal came (None before)."""
    return None if _signalled_at is None else _signalled_at + grace_seconds()


def _fsync(path: Path | str, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    """fsync a checkpoint: its file, or each file and directory of a directory one (links are not followed)."""
    if not path.is_dir() or path.is_symlink():
        _fsync(path)
        return
    for top, _dirs, files in os.walk(path):
        for name in files:
            if not os.path.islink(os.path.join(top, name)):
                _fsync(os.path.join(top, name))
        _fsync(top, os.O_DIRECTORY)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _write_bytes(path: Path, data: bytes) -> None:
    """Write a new file (never through a link planted at its name)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _install(target: Path, write: Callable[[Path], None]) -> None:
    """``write`` a temporary beside ``target``, fsync it, rename it over ``target``, fsync the directory."""
    tmp = target.with_name(f"{TEMP}{target.name}-{os.getpid()}-{threading.get_ident()}")
    _remove(tmp)
    try:
        write(tmp)
        _fsync_tree(tmp)
        if target.is_dir() and not target.is_symlink():  # the same step saved again as a directory
            _remove(target)
        os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise
    _fsync(target.parent, os.O_DIRECTORY)


def save(write: Callable[[Path], None] | bytes, step: int, *, keep: int = 2) -> Path:
    """Save the checkpoint of ``step``: ``write(path)`` writes it (a file or a directory at ``path``), or the bytes
    themselves. Then point ``latest`` at it and keep the newest ``keep`` (0: every one). Returns its path."""
    if step < 0:
        raise ValueError("step must be 0 or more")
    watch()
    where = directory()
    path = where / f"ckpt-{step:012d}"
    if isinstance(write, bytes):
        data = write
        _install(path, lambda p: _write_bytes(p, data))
    else:
        _install(path, write)
    _install(where / POINTER, lambda p: _write_bytes(p, path.name.encode()))
    complete, stale = _scan(where)
    for _, old in complete[:-keep] if keep > 0 else []:
        if old != path:
            _remove(old)
    for old in stale:
        _remove(old)
    return path


def _scan(where: Path) -> tuple[list[tuple[int, Path]], list[Path]]:
    """The complete checkpoints (renamed into place; never a link), oldest first, and the stale temporaries."""
    found, stale = [], []
    now = time.time()
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(where):
            m = NAME.match(entry.name)
            if m and (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)):
                found.append((int(m.group(1)), Path(entry.path)))
            elif entry.name.startswith(TEMP):
                with contextlib.suppress(FileNotFoundError):
                    if now - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMP_S:
                        stale.append(Path(entry.path))
    return sorted(found), stale


def _checkpoint(path: Path) -> bool:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def latest() -> tuple[int, Path] | None:
    """The latest checkpoint (step, path): the one ``latest`` names, else the newest complete one; never through a
    link planted in the directory."""
    where = directory()
    try:
        fd = os.open(where / POINTER, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            name = f.read(64).strip().decode()
        m = NAME.match(name)
        if m and _checkpoint(where / name):
            return int(m.group(1)), where / name
    except (OSError, ValueError):  # missing, a link, a directory, not text: look for the newest one
        pass
    complete = _scan(where)[0]
    return complete[-1] if complete else None


def load(read: Callable[[Path], T] | None = None) -> tuple[int, T | bytes] | None:
    """The latest checkpoint's step and content (``read(path)``, else the file's bytes), or None when none is."""
    found = latest()
    if found is None:
        return None
    step, path = found
    if read is not None:
        return step, read(path)
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        return step, f.read()


def resume_path() -> str | None:
    """The latest checkpoint's path, for a framework that loads it itself (Lightning's ``ckpt_path=``)."""
    found = latest()
    return str(found[1]) if found else None


def lightning_callback(every_n_steps: int = 500) -> Any:
    """A Lightning callback that saves through ``save`` every ``every_n_steps`` optimizer steps and at once when
    preempted (then stops the trainer); resume with ``trainer.fit(model, ckpt_path=checkpoint.resume_path())``.
    With DDP every rank joins the save (Lightning's barrier) and rank 0 writes it; strategies that write a shard per
    rank (DeepSpeed, FSDP's sharded state) need their own checkpointing."""
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError:
            raise ImportError(
                "checkpoint.lightning_callback needs Lightning: pip install lightning (or pytorch-lightning)"
            ) from None

    class PaiCheckpoint(Callback):  # type: ignore[misc, valid-type]
        """Saves in the training loop, never in a signal handler; every rank decides alike."""

        saved = -1

        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            stop = preempting()
            if getattr(trainer, "world_size", 1) > 1:  # any rank signalled: all save and stop together
                try:
                    stop = bool(trainer.strategy.reduce_boolean_decision(stop, all=False))
                except TypeError:  # older Lightning: all ranks must have it (each will, a step later at most)
                    stop = bool(trainer.strategy.reduce_boolean_decision(stop))
            step = int(trainer.global_step)
            if step > self.saved and (stop or (step > 0 and step % every_n_steps == 0)):
                if trainer.is_global_zero:
                    save(lambda p: trainer.save_checkpoint(str(p)), step)
                else:  # joins the save's barrier; DDP writes on rank 0 only
                    trainer.save_checkpoint(str(directory() / f"{TEMP}rank{trainer.global_rank}"))
                self.saved = step
            if stop:
                trainer.should_stop = True

    watch()
    return PaiCheckpoint()
