"""Which OS account runs a cluster user's tasks on the process runtime, so no user's task can become admin.

A task of the process runtime is a process on this host: run as the daemon's account, it could read the
daemon's ``runtime.json`` (the admin token), ``state.db`` (every job's secrets) and every other user's task
directory. So, when the daemon runs as root, each cluster user other than the cluster's owner runs as an OS
account of its own: a dedicated ``pai-<name>`` account the daemon makes with ``useradd --system`` (locked, no
home of its own), or the regular account an admin mapped the user to (``pai cluster user add NAME --account``).
A platform user's name alone never picks an existing account: a user named ``slurm`` would otherwise run as the
real ``slurm`` service account. An account counts as this daemon's only with its name, its comment (``pai_jupyter
tasks of <user> (home <hash>)``, naming this daemon's home: ``hostaccounts.py``) and a system uid; a mapped one only
with a regular uid (``UID_MIN`` .. ``UID_MAX`` of ``/etc/login.defs``). Anything else is refused with the reason.
Removing a user (``offboard.py``) removes the account this daemon made, never another daemon's.

That user's job and home directories belong to the account and are private (0700); the daemon's files stay
root's and 0600; the directories above them are 0711 (reachable by a name, never listed).

When that is impossible (the daemon is not root and tasks are not containers), one user's task could act as
any other: the cluster refuses a second user (``admission``) and says what to use instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import BadRequest, ConflictJobError
from .hostaccounts import SHELL, AccountError, HomeAccounts, NotOurs, dedicated_name, pids_of

__all__ = ["SHELL", "AccountError", "Accounts", "UidRanges", "dedicated_name", "pids_of"]
log = logging.getLogger("pai_jupyter.cluster")
LOGIN_DEFS = Path("/etc/login.defs")
NOBODY = 65534
ACCOUNT_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")  # what useradd takes (Debian's default NAME_REGEX, roughly)


@dataclass(frozen=True)
class UidRanges:
    """``/etc/login.defs``' ranges: regular accounts ``UID_MIN`` .. ``UID_MAX``, system ones (ours among them,
    made with ``useradd --system``) ``SYS_UID_MIN`` .. ``SYS_UID_MAX``. Defaults are shadow-utils' own."""

    uid_min: int = 1000
    uid_max: int = 60000
    sys_uid_min: int = 101
    sys_uid_max: int = 999

    @classmethod
    def read(cls, path: Path = LOGIN_DEFS) -> UidRanges:
        found: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in path.read_text(errors="replace").splitlines():
                words = line.split()
                if len(words) >= 2 and words[0] in ("UID_MIN", "UID_MAX", "SYS_UID_MIN", "SYS_UID_MAX"):
                    with contextlib.suppress(ValueError):
                        found[words[0]] = int(words[1])
        uid_min = found.get("UID_MIN", cls.uid_min)
        return cls(
            uid_min,
            found.get("UID_MAX", cls.uid_max),
            found.get("SYS_UID_MIN", cls.sys_uid_min),
            found.get("SYS_UID_MAX", uid_min - 1),
        )

    def regular(self, uid: int) -> bool:
        return self.uid_min <= uid <= self.uid_max and uid not in (0, NOBODY)

    def system(self, uid: int) -> bool:
        return self.sys_uid_min <= uid <= self.sys_uid_max and uid not in (0, NOBODY)


PROCESS_RUNTIMES = ("process", "slurm")
"""Runtimes whose tasks run as processes of an OS account (the daemon's, or one of the user's own)."""


class Accounts:
    """``isolating``: tasks of users other than ``owner`` run as their own accounts (daemon is root, process
    runtime). ``run_as(user)`` is (uid, gid) for such a user, None for one that runs as the daemon. ``mapped(user)``
    is the OS account an admin mapped the user to, if any (the store keeps it)."""

    def __init__(
        self,
        owner: str,
        runtime: str,
        *,
        home: Path,
        isolate: bool | None = None,
        mapped: Callable[[str], str | None] = lambda user: None,
        ranges: UidRanges | None = None,
    ) -> None:
        self.owner = owner
        self.runtime = runtime
        # tasks are processes of OS accounts: on this host (process), or on a batch system's nodes, where Slurm's
        # own uid handling (sbatch --uid/--gid, as root) runs them as the account; not in containers
        self.processes = runtime in PROCESS_RUNTIMES
        self.isolating = (os.geteuid() == 0 and self.processes) if isolate is None else isolate
        self.mapped = mapped
        self.ranges = ranges or UidRanges.read()
        # the accounts this home made (``home``: the daemon's local directory, whose path marks them)
        self.host = HomeAccounts(home, self.ranges.system)
        self._cache: dict[str, tuple[int, int]] = {}
        self.blocked: Path | None = None  # a directory above the home that other accounts cannot traverse

    def describe(self) -> str:
        if not self.processes:
            return ""
        if self.isolating:
            return f"tasks of users other than {self.owner} run as their own OS accounts"
        return f"every task runs as {self.owner} (one user only)"

    # ---- who may join ------------------------------------------------------------------------------------------
    def shared_safely(self) -> bool:
        """Can several users share this cluster without reaching each other (containers, or own accounts)?"""
        return not self.processes or self.isolating

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

    def vet(self, user: str, account: str | None) -> None:
        """Raise (400 or 409, saying why) when ``user``'s tasks could not run as ``account`` (an admin's mapping)
        or, without one, as the dedicated account: one of that name exists that the daemon did not make."""
        if account is not None:
            problem = self.mapping_problem(account)
            if problem:
                raise BadRequest(problem)
            return
        if not self.isolating or user == self.owner:
            return
        try:
            self.host.usable(user)
        except NotOurs as exc:
            raise ConflictJobError(str(exc)) from None

    def mapping_problem(self, account: str) -> str | None:
        """Why ``account`` cannot run a user's tasks (None: it can): it must be a regular account of this host."""
        if not ACCOUNT_NAME.fullmatch(account):
            return f"{account[:40]!r} is not an OS account name"
        try:
            pw = pwd.getpwnam(account)
        except KeyError:
            return f"there is no OS account {account!r} on this host"
        r = self.ranges
        if not r.regular(pw.pw_uid) or pw.pw_gid == 0:
            return (
                f"the OS account {account!r} (uid {pw.pw_uid}) is not a regular account: a user's tasks run only as "
                f"one with a uid from UID_MIN {r.uid_min} to UID_MAX {r.uid_max} ({LOGIN_DEFS}), never as a system "
                "or service account; leave the account out and the user gets one of their own"
            )
        return None

    # ---- accounts ----------------------------------------------------------------------------------------------
    def run_as(self, user: str) -> tuple[int, int] | None:
        if not self.isolating or user == self.owner:
            return None
        if user not in self._cache:
            self._cache[user] = self._account(user)
        return self._cache[user]

    def forget(self, user: str) -> None:
        self._cache.pop(user, None)

    def made_for(self, user: str) -> str | None:
        """The account this daemon made for ``user``, when one exists."""
        pw = self.host.find(user)
        return pw.pw_name if pw is not None else None

    def _account(self, user: str) -> tuple[int, int]:
        account = self.mapped(user)
        if account is not None:
            problem = self.mapping_problem(account)
            if problem:
                raise AccountError(f"cannot run {user}'s tasks: {problem}")
            pw = pwd.getpwnam(account)
            return pw.pw_uid, pw.pw_gid
        pw = self.host.get(user)
        if pw.pw_shell != SHELL:  # made by an older version with nologin, which the ssh plugin's logins cannot use
            with contextlib.suppress(OSError):
                subprocess.run(["usermod", "--shell", SHELL, pw.pw_name], capture_output=True, check=False)
        return pw.pw_uid, pw.pw_gid

    def remove(self, user: str, files: list[Path]) -> tuple[str | None, bool, str]:
        """Remove the account this daemon made for ``user`` (``HomeAccounts.remove``). An account an admin mapped
        the user to is the host's, and another daemon's is that daemon's: never touched here."""
        self.forget(user)
        return self.host.remove(user, files)

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

    def check_reachable(self) -> None:
        """Raise when a directory above the cluster's home keeps other accounts from their task directories."""
        if self.blocked is not None:
            raise AccountError(
                f"{self.blocked} cannot be traversed by other accounts, so a task running as "
                "its user's own account cannot reach its directory; put the cluster's home "
                "elsewhere (PAI_JUPYTER_HOME)"
            )

    def give(self, path: Path, run_as: tuple[int, int] | None, *, tree: bool = False) -> None:
        """``path`` (and with ``tree`` everything below it) to the account, private. Only for a tree root made
        before any task of the account ran: a walk of a tree a task can write could be led through its links."""
        if run_as is None:
            return
        self.check_reachable()
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
