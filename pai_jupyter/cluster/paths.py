"""Where the embedded cluster keeps its files: everything under ``$PAI_JUPYTER_HOME/local/`` (the home and
``runtime.json``, which the client reads too, are resolved in ``pai_jupyter.common.home``)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

# the home and runtime.json live in common (the client reads them); the daemon's modules import them from here
from ..common.home import local_dir as local_dir
from ..common.home import os_user as os_user
from ..common.home import pai_home as pai_home
from ..common.home import read_runtime as read_runtime
from ..common.home import runtime_file as runtime_file
from ..common.home import socket_file as socket_file


def cluster_config(local: Path) -> dict[str, Any]:
    """``local/cluster.yaml``, the cluster's settings (backend, taskPorts, virtualClusters, sharing, preemption,
    notification, gpuIdle), as a mapping: {} where there is none; ValueError naming the file where it is no mapping."""
    path = local / "cluster.yaml"
    try:
        data = yaml.safe_load(path.read_text()) if path.exists() else {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must be a mapping of settings (backend:, virtualClusters:, ...)")
    return data


def write_private_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON readable by the owner only (mode 0600), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


LOCK_NAME = "daemon.lock"


def make_private_dir(path: Path, mode: int = 0o700) -> None:
    """``path`` (and missing parents) with ``mode``; an existing one of ours gets it too (homes made by older
    versions were 0755). 0711 lets other accounts reach what is below by name, never list it."""
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    st = path.stat()
    if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != mode:
        os.chmod(path, mode)


def make_private_tree(root: Path) -> None:
    """Everything under ``root`` readable by its owner only: directories 0700, files 0600 (a home from a version
    that left the database, the logs and the task scripts readable by everyone)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, name), 0o700, follow_symlinks=False)
        for name in filenames:
            full = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                if not os.path.islink(full):
                    os.chmod(full, stat.S_IMODE(os.lstat(full).st_mode) & 0o700)


def take_daemon_lock(local: Path) -> int | None:
    """An exclusive flock on ``local/daemon.lock``, held for the daemon's life and released by the kernel when it
    dies (no stale lock after kill -9): the fd, or None when another daemon holds it. The file says its pid."""
    fd = os.open(local / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def lock_holder(local: Path) -> int | None:
    """The pid of the daemon that holds this home's lock (0 when it has not written it yet), or None when no
    daemon does."""
    try:
        fd = os.open(local / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        try:  # 0: held, but the holder has not written its pid yet
            return int(os.pread(fd, 32, 0).decode().strip() or 0)
        except ValueError:
            return 0
    else:
        return None
    finally:
        os.close(fd)
