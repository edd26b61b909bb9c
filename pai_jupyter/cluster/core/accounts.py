"""Which OS account runs a cluster user's tasks on the process runtime, so no user's task can become admin.

A task of the process runtime is a process on this host: run as the daemon's account, it could read the
daemon's ``runtime.json`` (the admin token), ``state.db`` (every job's secrets) and every other user's task
directory. So, when the daemon runs as root, each cluster user other than the cluster's owner runs as an OS
account of its own: a dedicated ``pai-<name>`` account the daemon makes with ``useradd --system`` (locked, no
home of its own), or the regular account an admin mapped the user to (``pai cluster user add NAME --account``).
A platform user's name alone never picks an existing account: a user named ``slurm`` would otherwise run as the
real ``slurm`` service account. An account counts as the daemon's only with its name, its comment (``pai_jupyter
tasks of <user>``) and a system uid; a mapped one only with a regular uid (``UID_MIN`` .. ``UID_MAX`` of
``/etc/login.defs``). Anything else is refused with the reason. Removing a user (``offboard.py``) removes the
account the daemon made.

That user's job and home directories belong to the account and are private (0700); the daemon's files stay
root's and 0600; the directories above them are 0711 (reachable by a name, never listed).

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import BadRequest, ConflictJobError

log = logging.getLogger("pai_jupyter.cluster")
LOGIN_DEFS = Path("/etc/login.defs")
NOBODY = 65534
PREFIX = "pai-"
# A locked account (useradd sets no password) with no home logs in nowhere by itself; it needs a real shell
# because the ssh plugin's sshd runs its ForceCommand through the account's shell (nologin refuses it), and the
# only keys that sshd takes are the ones the user registered, for a login as this very account.
SHELL = "/bin/sh"
ACCOUNT_NAME = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")  # what useradd takes (Debian's default NAME_REGEX, roughly)


class AccountError(RuntimeError):
    """A user's account cannot be found or made; the task fails to start with this message."""


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


def dedicated_name(user: str) -> str:
    """``pai-<user>`` where that is a valid account name, else a sanitized name with a hash (unique per user)."""
    if re.fullmatch(r"[a-z_][a-z0-9_-]{0,26}", user):
        return PREFIX + user
    clean = re.sub(r"[^a-z0-9_-]", "-", user.lower())[:18] or "u"
    return f"{PREFIX}{clean}-{hashlib.sha256(user.encode()).hexdigest()[:6]}"


def comment(user: str) -> str:
    """The GECOS comment of the account the daemon makes for ``user``: how it knows the account is its own."""
    return f"pai_jupyter tasks of {user}"


def pids_of(uid: int) -> list[int]:
    """The processes running as ``uid`` (a /proc/<pid> directory belongs to its process's uid)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    pids.append(int(entry.name))
    return pids


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
        name = dedicated_name(user)
        with contextlib.suppress(KeyError):
            if not self.ours(pwd.getpwnam(name), user):
                raise ConflictJobError(self._not_ours(name, user))

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

    def ours(self, pw: pwd.struct_passwd, user: str) -> bool:
        """Is this the account the daemon made for ``user`` (its name, its comment, a system uid)?"""
        return (
            pw.pw_name == dedicated_name(user)
            and pw.pw_gecos == comment(user)
            and self.ranges.system(pw.pw_uid)
            and pw.pw_gid != 0
        )

    def _not_ours(self, name: str, user: str) -> str:
        return (
            f"the OS account {name!r} exists but pai_jupyter did not make it (its comment is not "
            f"{comment(user)!r} or its uid is not a system one): {user}'s tasks never run as an account made "
            "for something else; remove that account, or map the user to a regular account "
            "(pai cluster user add NAME --account ACCOUNT)"
        )

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
        """The account the daemon made for ``user``, when one exists."""
        with contextlib.suppress(KeyError):
            if self.ours(pw := pwd.getpwnam(dedicated_name(user)), user):
                return pw.pw_name
        return None

    def _account(self, user: str) -> tuple[int, int]:
        account = self.mapped(user)
        if account is not None:
            problem = self.mapping_problem(account)
            if problem:
                raise AccountError(f"cannot run {user}'s tasks: {problem}")
            pw = pwd.getpwnam(account)
            return pw.pw_uid, pw.pw_gid
        name = dedicated_name(user)
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            pw = self._make(user, name)
        if not self.ours(pw, user):
            raise AccountError(self._not_ours(name, user))
        if pw.pw_shell != SHELL:  # made by an older version with nologin, which the ssh plugin's logins cannot use
            with contextlib.suppress(OSError):
                subprocess.run(["usermod", "--shell", SHELL, name], capture_output=True, check=False)
        return pw.pw_uid, pw.pw_gid

    @staticmethod
    def _make(user: str, name: str) -> pwd.struct_passwd:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise AccountError(
                f"cannot run {user}'s tasks as an account of their own: no useradd on this host to make "
                f"{name!r}; map the user to a regular account (pai cluster user add NAME --account ACCOUNT)"
            )
        done = subprocess.run(
            [
                useradd,
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                SHELL,
                "--comment",
                comment(user),
                name,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode not in (0, 9):  # 9: made meanwhile by a racing start
            raise AccountError(f"could not make the account {name!r} for {user}'s tasks: {done.stderr.strip()}")
        log.info("made the OS account %s for the tasks of %s", name, user)
        return pwd.getpwnam(name)

    def remove(self, user: str, files: list[Path]) -> tuple[str | None, bool, str]:
        """Remove the account the daemon made for ``user`` once none of its processes is left, after giving
        ``files`` (the trees it owned) to root: a later account may get its uid. Returns (the account or None,
        removed?, a sentence). An account an admin mapped the user to is the host's: never touched here."""
        self.forget(user)
        name = dedicated_name(user)
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            return None, False, f"{user} has no OS account of pai_jupyter's ({name} does not exist)"
        if not self.ours(pw, user):
            return name, False, self._not_ours(name, user)
        pids = pids_of(pw.pw_uid)
        if pids:
            return (
                name,
                False,
                (
                    f"the OS account {name} was kept: {len(pids)} processes still run as it (pids "
                    f"{', '.join(map(str, pids[:10]))}); remove the user again once they have ended"
                ),
            )
        for top in files:
            for dirpath, dirnames, filenames in os.walk(top):  # never follows a link; lchown changes the link
                for p in [dirpath, *(os.path.join(dirpath, n) for n in (*dirnames, *filenames))]:
                    with contextlib.suppress(FileNotFoundError):
                        os.lchown(p, 0, 0)
        userdel = shutil.which("userdel")
        if userdel is None:
            return name, False, f"the OS account {name} was kept: there is no userdel on this host"
        done = subprocess.run([userdel, name], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return name, False, f"the OS account {name} was kept: userdel said {done.stderr.strip()!r}"
        log.info("removed the OS account %s of %s", name, user)
        return name, True, f"the OS account {name} was removed"

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
