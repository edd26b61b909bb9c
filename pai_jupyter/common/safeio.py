"""Reading files a task can write, as root, without following anything the task planted.

The daemon runs as root on a shared machine; a task's account (or a container's root) can write its ``run/``
directory, its work dir and its output. A path opened there by name could be a symlink to ``/etc/shadow`` or to the
daemon's own ``runtime.json``, a FIFO that blocks the event loop, or a file of gigabytes. So every such read goes
through here: ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` from the directory (Linux
5.6+; else each component opened with ``O_NOFOLLOW`` from the one before), non-blocking, regular files only, and
bounded. Control files (written by root into root-owned directories) are read the same way as a second line.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

_SYS_OPENAT2 = 437  # the same number on every architecture (the unified syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY

_libc = ctypes.CDLL(None, use_errno=True)
_openat2_ok: bool | None = None  # unknown until the first call: ENOSYS (old kernel, seccomp) switches it off


class UnsafePath(OSError):
    """The name leads through a symlink, out of its directory, or to something that is not a regular file."""


def _openat2(dir_fd: int, name: str, flags: int) -> int:
    how = struct.pack("QQQ", flags, 0, _RESOLVE)
    fd = _libc.syscall(_SYS_OPENAT2, dir_fd, os.fsencode(name), how, len(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), name)
    return int(fd)


def _walk_nofollow(dir_fd: int, name: str, flags: int) -> int:
    """Each component opened from the one before with O_NOFOLLOW: no symlink, no '..' (the fallback)."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or name.startswith("/"):
        raise UnsafePath(errno.EXDEV, "not beneath its directory", name)
    fd = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags, dir_fd=fd)
    finally:
        os.close(fd)


def open_beneath(directory: Path | str, name: str, flags: int = _FLAGS) -> int:
    """An fd of ``directory/name`` opened without following any symlink (the directory itself included) and
    without leaving ``directory``; raises OSError (ELOOP / EXDEV / ENOENT ...). The caller closes it."""
    global _openat2_ok
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if _openat2_ok is not False:
            try:
                fd = _openat2(dir_fd, name, flags)
                _openat2_ok = True
                return fd
            except OSError as exc:
                if exc.errno not in (errno.ENOSYS, errno.EPERM) or _openat2_ok:
                    raise
                _openat2_ok = False
        return _walk_nofollow(dir_fd, name, flags)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def open_regular(directory: Path | str, name: str) -> Iterator[tuple[int, os.stat_result]]:
    """(fd, stat) of a regular file beneath ``directory``; UnsafePath for a FIFO, device, socket or directory."""
    fd = open_beneath(directory, name)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(errno.EINVAL, "not a regular file", name)
        yield fd, st
    finally:
        os.close(fd)


def read_beneath(directory: Path | str, name: str, limit: int = 64 * 1024) -> bytes | None:
    """At most ``limit`` bytes of the regular file ``directory/name``; None when it is missing or unsafe."""
    try:
        with open_regular(directory, name) as (fd, _st):
            return os.read(fd, limit)
    except OSError:
        return None


def read_text_beneath(directory: Path | str, name: str, limit: int = 64 * 1024) -> str | None:
    data = read_beneath(directory, name, limit)
    return None if data is None else data.decode("utf-8", "replace")


def size_beneath(directory: Path | str, name: str) -> int | None:
    """The size of the regular file ``directory/name``, or None when it is missing or unsafe."""
    try:
        with open_regular(directory, name) as (_fd, st):
            return st.st_size
    except OSError:
        return None


def is_file_beneath(directory: Path | str, name: str) -> bool:
    return size_beneath(directory, name) is not None


def read_range(directory: Path | str, name: str, start: int, length: int) -> bytes:
    """``length`` bytes from ``start`` of the regular file (fewer at its end); b"" when missing or unsafe."""
    try:
        with open_regular(directory, name) as (fd, _st):
            return os.pread(fd, length, start)
    except OSError:
        return b""
