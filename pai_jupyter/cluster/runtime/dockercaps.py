"""What a task's container may do to the host: the capabilities it keeps and ``no-new-privileges``.

A container shares the host's network namespace (``network_mode="host"``: a job's tasks reach each other on the
host's address, as on OpenPAI's hostNetwork), so Docker's default capabilities reach the host: ``NET_RAW`` opens
an ``AF_PACKET`` socket on ``lo`` and reads every loopback connection (a user's job read the admin's bearer token
off the daemon's port), ``NET_BIND_SERVICE`` takes the host's ports below 1024, ``MKNOD`` makes device nodes in
the writable mounts. So every capability is dropped and only those in ``KEPT`` are given back, each for a feature
that was measured to need it: with none at all, the Docker tests pass but for sshd; the rest was measured with
busybox in a container of the set less that capability (the operation failing with EPERM or EACCES).
"""

from __future__ import annotations

from typing import Any

KEPT: dict[str, str] = {
    # sshd (the ssh plugin, `pai ssh`, web SSH): the host's OpenSSH in pai-test/sshd
    "SETUID": "sshd's privilege separation drops its pre-auth child to the `sshd` account (setresuid); also `su` "
    "in a task's commands",
    "SETGID": "sshd's privilege separation (setgroups, setresgid), as SETUID",
    "SYS_CHROOT": "sshd's pre-auth child chroots into /run/sshd (without it: chroot: Operation not permitted)",
    "AUDIT_WRITE": "sshd with a pty (an interactive `pai ssh`, web SSH) writes a login audit record and exits when "
    "the kernel refuses it (linux_audit_write_entry failed: Operation not permitted)",
    # a task's own commands as root, as on OpenPAI (whose containers run with the runtime's default set), in images
    # whose files belong to another account (docker-stacks' /opt/conda and /home/jovyan are uid 1000's)
    "CHOWN": "root gives files to other accounts: `chown` in a job's set-up, dpkg/tar unpacking files owned by an "
    "image's service accounts",
    "DAC_OVERRIDE": "root writes where another account owns the directory (`pip install` into a jovyan-owned "
    "/opt/conda)",
    "FOWNER": "root changes the mode and times of a file it does not own (chmod; tar and pip restoring them)",
    "KILL": "a stop's SIGTERM to every process of the container (`kill -TERM -1`) reaches those running as another "
    "account (a `su` session, sshd's children), so they get the grace period to save a checkpoint, not a SIGKILL",
}
"""Capability (Docker's name, without ``CAP_``) -> the feature that needs it. Docker's other defaults are dropped:
``FSETID``, ``SETPCAP``, and those in ``NEVER``."""

NEVER = frozenset(
    {
        "NET_RAW",  # AF_PACKET on the host's lo: every loopback connection, tokens and all
        "NET_ADMIN",  # the host's interfaces, routes and firewall
        "NET_BIND_SERVICE",  # the host's ports below 1024
        "MKNOD",  # device nodes in run/, the user's home, the output directory
        "SYS_ADMIN",  # mounts, namespaces: the usual way out of a container
        "SYS_PTRACE",  # other processes' memory
        "SETFCAP",  # file capabilities on a binary in a mount the host runs (the user's home)
    }
)
"""What a task's container never gets, whatever a task needs (``test_dockercaps.py`` keeps it out of ``KEPT``)."""

SECURITY_OPT = ["no-new-privileges"]
"""No process in the container gains privileges by exec (a setuid binary, file capabilities): what it holds is at
most ``KEPT``. sshd works under it (its privilege separation only drops privileges)."""


def create_args() -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` that confine a task's container."""
    return {"cap_drop": ["ALL"], "cap_add": sorted(KEPT), "security_opt": list(SECURITY_OPT)}
