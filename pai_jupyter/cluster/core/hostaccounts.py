"""The ``pai-<name>`` accounts a daemon makes on its host, and how it proves which ones are its own.

Several daemons may run on one host (two clusters, a test suite beside a real cluster), each with a user ``bob``.
Each account's comment names the user and the daemon's home (``pai_jupyter tasks of bob (home 3f9a0c12d4e1)``,
a hash of the home's path), so one cluster's ``bob`` never runs as, and never removes (``userdel``), the account of
another cluster's ``bob``: that account is ``pai-bob``, and the second cluster's is ``pai-bob-<hash>`` (the
hash of the user and that home). An account an older version made (the comment without a home) is claimed only by
the home whose files show it used it (the user's home directory belongs to its uid); anything else of that name is
not this home's, and is never used or removed.

Making and claiming hold a host-wide lock (root's ``/run``): two daemons never both claim one account.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger("pai_jupyter.cluster")
PREFIX = "pai-"
# A locked account (useradd sets no password) with no home logs in nowhere by itself; it needs a real shell
# because the ssh plugin's sshd runs its ForceCommand through the account's shell (nologin refuses it), and the
# only keys that sshd takes are the ones the user registered, for a login as this very account.
SHELL = "/bin/sh"
LOCK = Path("/run/pai_jupyter-accounts.lock")  # /run is root's: no account can plant or hold this file


class AccountError(RuntimeError):
    """A user's account cannot be found or made; the task fails to start with this message."""


class NotOurs(AccountError):
    """An account of the user's name exists that pai_jupyter did not make: never used, never removed."""


def dedicated_name(user: str) -> str:
    """``pai-<user>`` where that is a valid account name, else a sanitized name with a hash (unique per user)."""
    if re.fullmatch(r"[a-z_][a-z0-9_-]{0,26}", user):
        return PREFIX + user
    return _hashed(user, user)


def _hashed(user: str, key: str) -> str:
    clean = re.sub(r"[^a-z0-9_-]", "-", user.lower())[:18] or "u"
    return f"{PREFIX}{clean}-{hashlib.sha256(key.encode()).hexdigest()[:6]}"


def home_tag(local_dir: Path) -> str:
    """The mark of one daemon home in its accounts' comments: a hash of the home's real path."""
    return hashlib.sha256(str(Path(local_dir).resolve()).encode()).hexdigest()[:12]


def comment(user: str, tag: str) -> str:
    """The GECOS comment of the account the daemon of home ``tag`` makes for ``user``: how it knows it is its own."""
    return f"{legacy_comment(user)} (home {tag})"


def legacy_comment(user: str) -> str:
    """The comment of an account made before accounts named their home."""
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


@contextlib.contextmanager
def host_lock() -> Iterator[None]:
    """Hold the host's lock on making and claiming accounts (no lock where ``/run`` cannot hold one: not root)."""
    try:
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.debug("no account lock at %s: %s", LOCK, exc)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _getpwnam(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


class HomeAccounts:
    """The accounts the daemon of one home (``local``, its local directory) made; ``system(uid)``: a uid that
    useradd --system gives."""

    def __init__(self, local: Path, system: Callable[[int], bool]) -> None:
        self.local = local
        self.tag = home_tag(local)
        self.system = system

    def _used(self, user: str) -> int | None:
        """The uid that owns ``user``'s home directory in this home (the account their tasks ran as), if any."""
        try:
            return (self.local / "users" / user / "home").lstat().st_uid
        except OSError:
            return None

    def names(self, user: str) -> tuple[str, str]:
        """The account names ``user`` may get: ``pai-<user>``, or this home's own when another home has that."""
        return dedicated_name(user), _hashed(user, f"{self.tag}/{user}")

    def whose(self, pw: pwd.struct_passwd, user: str) -> str:
        """'ours', 'legacy' (an older version's that this home used, unclaimed), 'other' (another home's, or an older
        version's this home never used) or 'foreign' (not pai_jupyter's)."""
        if pw.pw_gid == 0 or not self.system(pw.pw_uid):
            return "foreign"
        if pw.pw_gecos == comment(user, self.tag):
            return "ours"
        if pw.pw_gecos == legacy_comment(user):  # an older version's: this home's if its files say so
            return "legacy" if pw.pw_name == dedicated_name(user) and self._used(user) == pw.pw_uid else "other"
        if re.fullmatch(re.escape(legacy_comment(user)) + r" \(home [0-9a-f]{12}\)", pw.pw_gecos):
            return "other"
        return "foreign"

    def find(self, user: str) -> pwd.struct_passwd | None:
        """This home's account for ``user``, if it has one (an unclaimed one of an older version does not count)."""
        for name in self.names(user):
            pw = _getpwnam(name)
            if pw is not None and self.whose(pw, user) == "ours":
                return pw
        return None

    def usable(self, user: str) -> str:
        """The name this home's account for ``user`` has or would get; NotOurs when none can be had."""
        for name in self.names(user):
            pw = _getpwnam(name)
            if pw is None or self.whose(pw, user) in ("ours", "legacy"):
                return name
            if self.whose(pw, user) == "foreign":
                raise NotOurs(self.not_ours(name, user))
        raise NotOurs(f"the OS accounts {' and '.join(self.names(user))} are other pai_jupyter clusters' on this host")

    def get(self, user: str) -> pwd.struct_passwd:
        """This home's account for ``user``: found, claimed (an older version's) or made (``useradd``)."""
        found = self.find(user)
        if found is not None:
            return found
        with host_lock():
            name = self.usable(user)
            pw = _getpwnam(name)
            if pw is None:
                self._make(user, name)
            elif pw.pw_gecos != comment(user, self.tag):  # an older version's: this home claims it
                done = subprocess.run(["usermod", "--comment", comment(user, self.tag), name], capture_output=True)
                if done.returncode != 0:
                    raise AccountError(f"could not claim the OS account {name!r}: {done.stderr.decode().strip()}")
        pw = _getpwnam(name)
        if pw is None or self.whose(pw, user) != "ours":
            raise AccountError(f"the OS account {name!r} for {user}'s tasks changed while it was made or claimed")
        return pw

    def _make(self, user: str, name: str) -> None:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise AccountError(
                f"cannot run {user}'s tasks as an account of their own: no useradd on this host to make "
                f"{name!r}; map the user to a regular account (pai cluster user add NAME --account ACCOUNT)"
            )
        argv = [useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent"]
        argv += ["--shell", SHELL, "--comment", comment(user, self.tag), name]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode not in (0, 9):  # 9: made meanwhile (by a program without the lock): get() checks whose
            raise AccountError(f"could not make the account {name!r} for {user}'s tasks: {done.stderr.strip()}")
        log.info("made the OS account %s for the tasks of %s", name, user)

    def made(self) -> list[pwd.struct_passwd]:
        """Every account this home made, whoever it was for."""
        end = f" (home {self.tag})"
        return [pw for pw in pwd.getpwall() if pw.pw_gecos.endswith(end) and pw.pw_name.startswith(PREFIX)]

    @staticmethod
    def not_ours(name: str, user: str) -> str:
        return (
            f"the OS account {name!r} exists but pai_jupyter did not make it (its comment is not "
            f"{legacy_comment(user)!r} and a home, or its uid is not a system one): {user}'s tasks never run as an "
            "account made for something else; remove that account, or map the user to a regular account "
            "(pai cluster user add NAME --account ACCOUNT)"
        )

    def remove(self, user: str, files: list[Path]) -> tuple[str | None, bool, str]:
        """Remove this home's account for ``user`` once none of its processes is left, after giving ``files`` (the
        trees it owned) to root: a later account may get its uid. Returns (the account or None, removed?, a
        sentence). Another home's account, or one pai_jupyter did not make, is never touched."""
        pw = self.find(user)
        if pw is None:
            return None, False, f"{user} has no OS account of this cluster's ({' or '.join(self.names(user))})"
        name = pw.pw_name
        pids = pids_of(pw.pw_uid)
        if pids:
            listed = ", ".join(map(str, pids[:10]))
            kept = f"{len(pids)} processes still run as it (pids {listed}); remove the user again once they have ended"
            return name, False, f"the OS account {name} was kept: {kept}"
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
