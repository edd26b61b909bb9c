"""Reading a file that a task can write, as the daemon (root): never through a link the task planted.

A task's account (or a container's root) can put a symlink, a FIFO or a device where the daemon expects a small
file of the task's; root following it would serve or block on a file of root's. ``read_beneath`` opens the file
beneath a directory the daemon trusts (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
RESOLVE_NO_MAGICLINKS; where the kernel has no openat2, each component opened with O_NOFOLLOW), non-blocking,
and reads it only when it is a regular file, at most ``limit`` bytes.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from pathlib import Path

SYS_OPENAT2 = 437  # the same number on every Linux architecture (since 5.6)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc: ctypes.CDLL | None = None
_have_openat2 = True


def _openat2(dirfd: int, name: str, flags: int) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    how = _OpenHow(flags, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(
        ctypes.c_long(SYS_OPENAT2), ctypes.c_int(dirfd), os.fsencode(name), ctypes.byref(how), ctypes.sizeof(how)
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), name)
    return int(fd)


def _open_by_parts(dirfd: int, name: str, flags: int) -> int:
    """openat2's answer without it: every component opened with O_NOFOLLOW, directories as directories."""
    parts = name.split("/")
    fd = os.dup(dirfd)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags, dir_fd=fd)
    finally:
        os.close(fd)


def open_beneath(dirfd: int, name: str, flags: int = _FILE_FLAGS) -> int:
    """An fd of ``name`` (relative, no ``..``) beneath the directory ``dirfd``, with no symlink on the way."""
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in name.split("/")):
        raise OSError(errno.EINVAL, "not a plain relative name", name)
    global _have_openat2
    if _have_openat2:
        try:
            return _openat2(dirfd, name, flags)
        except OSError as exc:
            if exc.errno not in (errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter that does not know it
                raise
            _have_openat2 = False
    return _open_by_parts(dirfd, name, flags)


def read_beneath(directory: Path, name: str, limit: int) -> bytes | None:
    """The first ``limit`` bytes of the regular file ``directory/name``; None when it is missing, not a regular
    file, or reached through a symlink (``directory`` itself included: its last component is not followed)."""
    try:
        dirfd = os.open(directory, _DIR_FLAGS)
    except OSError:
        return None
    try:
        fd = open_beneath(dirfd, name)
    except OSError:
        return None
    finally:
        os.close(dirfd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
