"""The job's SSH key pair, ``<job dir>/ssh/id_ed25519`` and ``.pub``: made by the daemon before the job's first
task starts, readable by the job's tasks (``jobssh``) and nobody else.

When the job's tasks run as their user's own account (the daemon is root, cluster/core/accounts.py), the
directory is the daemon's, mode 0750, group the account's, and the key files 0640 (ssh checks the mode of a key
file only when the user owns it); else (the tasks run as the daemon's account, or in containers as root) 0700
and 0600. Tasks only read it, and the daemon never follows a path a task could have planted: every access goes
through an fd of the directory opened without following a link, and a key file is read only when it is the
daemon's own regular file with one link (no symlink, FIFO or hard link to a file of root's).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import stat
import subprocess
import tempfile
from contextlib import suppress
from pathlib import Path

KEY_DIR = "ssh"
JOB_KEY = "id_ed25519"
PUBLIC = JOB_KEY + ".pub"
MAX_BYTES = 16384
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class JobKeyError(RuntimeError):
    """The key directory or a key file is not the daemon's own: it is left alone, never read or written."""


def key_dir(job_dir: Path) -> Path:
    return job_dir / KEY_DIR


def _open_dir(job_dir: Path, *, make: bool) -> int | None:
    """An fd of the key directory (made when ``make``), checked to be the daemon's; None when there is none."""
    jfd = os.open(job_dir, _DIR)
    try:
        if make:
            with suppress(FileExistsError):
                os.mkdir(KEY_DIR, 0o700, dir_fd=jfd)
        try:
            fd = os.open(KEY_DIR, _DIR, dir_fd=jfd)
        except FileNotFoundError:
            return None
        except OSError as exc:  # ELOOP, ENOTDIR: a link or a file in its place
            raise JobKeyError(f"{key_dir(job_dir)} is not a directory ({exc.strerror}): not used") from None
    finally:
        os.close(jfd)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise JobKeyError(f"{key_dir(job_dir)} is not the daemon's own directory: not used")
    return fd


def _open_own(dirfd: int, name: str) -> int | None:
    """An fd of key file ``name`` when it is the daemon's own regular file with one link; None when absent."""
    try:
        fd = os.open(name, _FILE, dir_fd=dirfd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JobKeyError(f"the job key file {name} cannot be opened ({exc.strerror}): not used") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1 or st.st_size > MAX_BYTES:
        os.close(fd)
        raise JobKeyError(f"the job key file {name} is not the daemon's own file: not used")
    return fd


def _read_at(dirfd: int, name: str) -> bytes | None:
    fd = _open_own(dirfd, name)
    if fd is None:
        return None
    try:
        return os.read(fd, MAX_BYTES)
    finally:
        os.close(fd)


def read(job_dir: Path, name: str = JOB_KEY) -> bytes | None:
    """The job's private key (or ``PUBLIC``); None when it is not made yet or is not the daemon's own."""
    try:
        fd = _open_dir(job_dir, make=False)
        if fd is None:
            return None
        try:
            return _read_at(fd, name)
        finally:
            os.close(fd)
    except (OSError, JobKeyError):
        return None


def ensure(job_dir: Path, comment: str, group: int | None) -> str:
    """The job's public key line; the pair is made on the first call. ``group``: the gid of the account the job's
    tasks run as (None: they run as the daemon's account or in a container), set with the modes on every call."""
    job_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # the first task's directory is made after its spec
    fd = _open_dir(job_dir, make=True)
    assert fd is not None
    try:
        public, private = _read_at(fd, PUBLIC), _read_at(fd, JOB_KEY)
        if public is None or private is None:
            public = _make(fd, comment)
        os.fchown(fd, -1, os.getegid() if group is None else group)
        os.fchmod(fd, 0o700 if group is None else 0o750)
        for name in (PUBLIC, JOB_KEY):
            ffd = _open_own(fd, name)
            assert ffd is not None
            try:
                os.fchown(ffd, -1, os.getegid() if group is None else group)
                os.fchmod(ffd, 0o600 if group is None else 0o640)
            finally:
                os.close(ffd)
        return public.decode().strip()
    finally:
        os.close(fd)


def _make(dirfd: int, comment: str) -> bytes:
    """A new pair, made in a private directory of the daemon's and written beside the fd; its public key."""
    with tempfile.TemporaryDirectory(prefix="pai-jobkey-") as tmp:
        try:
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", f"{tmp}/k"],
                check=True,
                capture_output=True,
                timeout=30,
            )
        except FileNotFoundError:
            raise RuntimeError("ssh-keygen is missing on this host: install openssh-client") from None
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"ssh-keygen failed: {exc.stderr.decode(errors='replace').strip()}") from None
        public, private = Path(tmp, "k.pub").read_bytes(), Path(tmp, "k").read_bytes()
    for name, data in ((PUBLIC, public), (JOB_KEY, private)):  # the private key last: both exist once it does
        new = f".new-{secrets.token_hex(4)}"
        fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(new, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    return public


def fingerprint(public_key: str) -> str | None:
    """``SHA256:…`` of a public key line, as ``ssh-keygen -l`` prints it."""
    try:
        blob = base64.b64decode(public_key.split()[1], validate=True)
    except (IndexError, ValueError):
        return None
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
