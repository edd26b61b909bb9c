"""Which OS account runs a cluster user's tasks on the process runtime, so no user's task can become admin.

A task of the process runtime is a process on this host: run as the daemon's account, it could read the
daemon's ``runtime.json`` (the admin token), ``state.db`` (every job's secrets) and every other user's task
directory. So, when the daemon runs as root, each cluster user other than the cluster's owner runs as an OS
account of its own: the existing account of that name when it is a regular one (uid >= 1000), else a dedicated
``pai-<name>`` account the daemon makes with ``useradd`` (no login, no home of its own). That user's job and
home directories belong to the account and are private (0700); the daemon's files stay root's and 0600; the
directories above them are 0711 (reachable by a name, never listed).

When that is impossible (the daemon is not root and tasks are not containers), one user's task could act as
any other: the cluster refuses a second user (``admission``) and says what to use instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

from .errors import ConflictJobError

log = logging.getLogger("pai_jupyter.cluster")
UID_MIN = 1000  # below: system accounts, never used for a cluster user's tasks
NOBODY = 65534
PREFIX = "pai-"


class AccountError(RuntimeError):
    """A user's account cannot be found or made; the task fails to start with this message."""


def dedicated_name(user: str) -> str:
    """``pai-<user>`` where that is a valid account name, else a sanitized name with a hash (unique per user)."""
    if re.fullmatch(r"[a-z_][a-z0-9_-]{0,26}", user):
        return PREFIX + user
    clean = re.sub(r"[^a-z0-9_-]", "-", user.lower())[:18] or "u"
    return f"{PREFIX}{clean}-{hashlib.sha256(user.encode()).hexdigest()[:6]}"


class Accounts:
    """``isolating``: tasks of users other than ``owner`` run as their own accounts (daemon is root, process
    runtime). ``run_as(user)`` is (uid, gid) for such a user, None for one that runs as the daemon."""

    def __init__(self, owner: str, runtime: str, *, isolate: bool | None = None) -> None:
        self.owner = owner
        self.runtime = runtime
        self.isolating = (os.geteuid() == 0 and runtime == "process") if isolate is None else isolate
        self._cache: dict[str, tuple[int, int]] = {}
        self.blocked: Path | None = None  # a directory above the home that other accounts cannot traverse

    def describe(self) -> str:
        if self.runtime != "process":
            return ""
        if self.isolating:
            return f"tasks of users other than {self.owner} run as their own OS accounts"
        return f"every task runs as {self.owner} (one user only)"

    # ---- who may join ------------------------------------------------------------------------------------------
    def shared_safely(self) -> bool:
        """Can several users share this cluster without reaching each other (containers, or own accounts)?"""
        return self.runtime != "process" or self.isolating

    def admission(self, name: str, existing: set[str]) -> None:
        """Raise when adding user ``name`` would let one user's tasks act as another's (or as the admin)."""
        if self.shared_safely() or name in existing or not (existing - {name}):
            return
        raise ConflictJobError(
            f"cannot add user {name!r}: this cluster runs tasks as plain processes of the OS account "
            f"{self.owner!r} (the daemon is not root and Docker is not used), so a second user's tasks could read "
            "the admin token, every job's secrets and every other user's files. Start the daemon as root (each "
            "user's tasks then run as an OS account of their own) or with Docker (pai cluster start --runtime "
            "docker), or give each user a cluster of their own"
        )

    # ---- accounts ----------------------------------------------------------------------------------------------
    def run_as(self, user: str) -> tuple[int, int] | None:
        if not self.isolating or user == self.owner:
            return None
        if user not in self._cache:
            self._cache[user] = self._account(user)
        return self._cache[user]

    @staticmethod
    def _account(user: str) -> tuple[int, int]:
        with contextlib.suppress(KeyError):
            pw = pwd.getpwnam(user)
            if UID_MIN <= pw.pw_uid != NOBODY:
                return pw.pw_uid, pw.pw_gid
        name = dedicated_name(user)
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            useradd = shutil.which("useradd")
            if useradd is None:
                raise AccountError(
                    f"cannot run {user}'s tasks as an account of their own: no useradd on this "
                    f"host to make {name!r}; make a regular account named {user!r}"
                ) from None
            done = subprocess.run(
                [
                    useradd,
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--home-dir",
                    "/nonexistent",
                    "--shell",
                    "/bin/sh",
                    "--comment",
                    f"pai_jupyter tasks of {user}",
                    name,
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode not in (0, 9):  # 9: made meanwhile by a racing start
                raise AccountError(
                    f"could not make the account {name!r} for {user}'s tasks: {done.stderr.strip()}"
                ) from None
            log.info("made the OS account %s for the tasks of %s", name, user)
            pw = pwd.getpwnam(name)
        return pw.pw_uid, pw.pw_gid

    # ---- directories -------------------------------------------------------------------------------------------
    def open_path(self, local: Path) -> None:
        """In isolating mode, other accounts must reach their own directories below ``local``: make it and the
        directories between reachable by name (0711) and check the ones above allow it too."""
        if not self.isolating:
            return
        for d in (local.parent, local, local / "jobs", local / "users"):
            d.mkdir(mode=0o700, exist_ok=True)
            os.chmod(d, 0o711)
        for above in local.parent.resolve().parents:
            if not above.stat().st_mode & 0o001:
                log.warning(
                    "%s cannot be traversed by other accounts: tasks of users other than %s will fail to "
                    "start; put the cluster's home elsewhere (PAI_JUPYTER_HOME)",
                    above,
                    self.owner,
                )
                self.blocked = above
                return

    def give(self, path: Path, run_as: tuple[int, int] | None, *, tree: bool = False) -> None:
        """``path`` (and with ``tree`` everything below it) to the account, private."""
        if run_as is None:
            return
        if self.blocked is not None:
            raise AccountError(
                f"{self.blocked} cannot be traversed by other accounts, so a task running as "
                "its user's own account cannot reach its directory; put the cluster's home "
                "elsewhere (PAI_JUPYTER_HOME)"
            )
        uid, gid = run_as
        paths = [path]
        if tree:
            for dirpath, dirnames, filenames in os.walk(path):
                paths += [Path(dirpath, n) for n in (*dirnames, *filenames)]
        for p in paths:
            with contextlib.suppress(FileNotFoundError):
                st = p.lstat()
                if (st.st_uid, st.st_gid) != (uid, gid):
                    os.lchown(p, uid, gid)
