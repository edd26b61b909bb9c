"""The ``ssh`` runtime plugin: an sshd per task, OpenPAI's semantics (runtime plugin ``ssh``).

Every task of a job with the plugin runs its own sshd on the task's ``ssh`` port (``PAI_CONTAINER_SSH_PORT``),
as the task's user, with a config and host key of its own under ``$PAI_TASK_DIR/run/ssh/`` (the host's sshd on
the process runtime, the image's in Docker). A login runs ``login.sh`` (sshd's ``ForceCommand``): it loads the
task's environment, changes to the task's working dir, then runs the shell, the command, or sftp (so ``scp``
lands relative paths in the working dir too). The daemon reports the host key's public half (``host_key``) in
the job's ssh info, so clients pin it instead of trusting whatever answers on the port.

Who may log in (``authorized_keys``): the job's key (a key pair made per job, downloadable by its owner, see
``jobkey``), the user's stored public keys and ``userssh.value``. With ``jobssh: true`` (forced off when
``gangAllocation`` is false, as OpenPAI does) the job's private key and an ssh config naming every task
``<role>-<index>`` are put in the task, and ``ssh`` / ``scp`` on the task's PATH use them; ``sshbarrier: true``
holds the user's command until every other task's sshd lets the job key in (exit 249 after
``sshbarrierTimeout`` minutes, default 300, as OpenPAI's sshbarrier.sh).

Every file here that a task can write is read by the daemon through ``safeio`` (no symlink is followed).

Only the file writes run before the command; the host key and sshd start in the background.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
from pathlib import Path
from typing import Any

from ...common import safeio
from ...protocol import Job
from ...protocol.rules import SSH_PUBLIC_KEY
from ..runtime import taskdir
from ..runtime.view import Mount, TaskView
from . import jobkey

KEY_RE = re.compile(SSH_PUBLIC_KEY)
JOB_KEY = jobkey.JOB_KEY
TASK_SSH = "run/ssh"  # the task's sshd files, beneath its task directory (task-writable)
HOST_KEY = "host_ed25519"
USER_KEYS_MAX = 1 << 20
DOCKER_JOB_KEY_DIR = "/pai/jobssh"
EXIT_SSH_BARRIER = 249  # OpenPAI's exit spec: SSH barrier timeout
# OpenPAI's sshbarrier.sh polls 1800 times 10 s apart (5 h) when no timeout is given (its README's "30 mins" is
# not what it runs)
BARRIER_DEFAULT_MINUTES = 300
SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/sftp-server", "/usr/libexec/openssh/sftp-server")
MAX_KEYS = 50
NO_SSHD = "no sshd in this task: the ssh plugin needs openssh-server in the image"


class KeyError_(ValueError):
    """A public key that is not one line of ``<type> <base64> [comment]``."""


def plugin(job: Job) -> dict[str, Any] | None:
    """The job's ``ssh`` plugin parameters ({} when it has none), or None when the job has no ssh plugin."""
    for p in job.runtime_plugins:
        if p.get("plugin") == "ssh":
            params = p.get("parameters")
            return dict(params) if isinstance(params, dict) else {}
    return None


def planned(job: Job) -> dict[tuple[str, int], dict[str, dict[str, Any]]]:
    """Every task of every role runs sshd (OpenPAI: containers reach each other as ``<role>-<index>``)."""
    params = plugin(job)
    if params is None:
        return {}
    params["jobssh"] = str(params.get("jobssh")).lower() == "true" and job.gang_allocation  # OpenPAI's reading
    return {(r.name, i): {"ssh": params} for r in job.task_roles for i in range(r.instances)}


def check_public_key(text: str) -> str:
    """The key, stripped, if it is one OpenSSH public key line; else KeyError_ with why."""
    key = str(text).strip()
    if not KEY_RE.match(key):
        raise KeyError_(
            "a public key must be one line: <type> <base64> [comment], e.g. the contents of ~/.ssh/id_ed25519.pub"
        )
    return key


# ---- keys on the daemon's side -----------------------------------------------------------------------------------
def user_keys_file(home: Path) -> Path:
    """The user's stored public keys, beside their home (``users/<name>/ssh_keys.json``)."""
    return home.parent / "ssh_keys.json"


def load_user_keys(home: Path) -> list[dict[str, Any]]:
    """The stored keys; read without following a link (the directory is the user's account's)."""
    raw = safeio.read_beneath(home.parent, user_keys_file(home).name, USER_KEYS_MAX)
    try:
        data = json.loads(raw or b"[]")
    except ValueError:
        return []
    return (
        [k for k in data if isinstance(k, dict) and isinstance(k.get("value"), str)] if isinstance(data, list) else []
    )


def save_user_keys(home: Path, keys: list[dict[str, Any]]) -> None:
    path = user_keys_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(keys, f)
    os.replace(tmp, path)


def job_key_dir(job_dir: Path) -> Path:
    return jobkey.key_dir(job_dir)


def reported_host_key(task_dir: Path) -> str | None:
    """The public host key the task's sshd reported (its ``run/ssh/host_ed25519.pub``), read without following a
    link; None until the sshd made it, or when it is not one public key line."""
    raw = safeio.read_beneath(task_dir, f"{TASK_SSH}/{HOST_KEY}.pub", 4096)
    try:
        return check_public_key(raw.decode()) if raw else None
    except (KeyError_, UnicodeDecodeError):
        return None


def authorized_keys(
    job_dir: Path, home: Path, params: dict[str, Any], comment: str, group: int | None = None
) -> list[str]:
    """Who may log into the job's tasks: the job key (made now if need be, see ``jobkey.ensure``), the user's
    stored keys, ``userssh.value``."""
    keys = [jobkey.ensure(job_dir, comment, group)]
    keys += [k["value"] for k in load_user_keys(home)]
    userssh = params.get("userssh")
    if isinstance(userssh, dict) and isinstance(userssh.get("value"), str) and userssh["value"].strip():
        for line in userssh["value"].strip().splitlines():
            try:
                keys.append(check_public_key(line))
            except KeyError_:
                continue  # the submit check refused bad keys; a line that slipped through is simply not used
    return list(dict.fromkeys(keys))


def enrich(
    own: dict[str, Any], job_dir: Path, home: Path, *, view: TaskView, comment: str, group: int | None = None
) -> dict[str, Any]:
    """The task's services with what its sshd needs added (keys, where the job key is in the task). ``group``: the
    gid of the account the job's tasks run as, which may read the job key (None: the daemon's own account)."""
    if "ssh" not in own:
        return own
    info = dict(own["ssh"])
    params = info.get("parameters") or {}
    info["authorizedKeys"] = authorized_keys(job_dir, home, params, comment, group)
    key_dir = job_key_dir(job_dir)
    info["jobKey"] = f"{view.path(key_dir, DOCKER_JOB_KEY_DIR)}/{JOB_KEY}" if params.get("jobssh") else None
    return {**own, "ssh": info}


# ---- shell run inside the task -----------------------------------------------------------------------------------
_LOGIN = """#!/bin/sh
# ForceCommand of this task's sshd: the task's environment and working dir, then the shell / command / sftp.
pai_term=$TERM; pai_tty=$SSH_TTY; pai_conn=$SSH_CONNECTION; pai_client=$SSH_CLIENT; pai_cmd=$SSH_ORIGINAL_COMMAND
pai_d=$(dirname "$0")
. "$pai_d/env.sh"
cd "$(cat "$pai_d/workdir")" || exit 1
export TERM="${pai_term:-xterm}" SSH_CONNECTION="$pai_conn" SSH_CLIENT="$pai_client"
[ -n "$pai_tty" ] && export SSH_TTY="$pai_tty"
pai_sh=$(command -v bash || echo /bin/sh)
case "$pai_cmd" in
  '') [ -t 0 ] && exec "$pai_sh" -i; exec "$pai_sh" ;;
  %(sftp_cases)s) for s in %(sftp)s; do [ -x "$s" ] && exec "$s"; done; echo "no sftp-server here" >&2; exit 1 ;;
  *) exec "$pai_sh" -c "$pai_cmd" ;;
esac
"""


def _heredoc(path: str, body: str) -> str:
    tag = f"PAI_EOF_{secrets.token_hex(6)}"
    return f"cat >{path} <<'{tag}'\n{body.rstrip(chr(10))}\n{tag}\n"


def prelude(info: dict[str, Any]) -> str:
    """Shell run before the command (file writes only): sshd's config, login script, keys, the task's env,
    and ``ssh``/``scp`` wrappers on PATH that know the other tasks (with jobssh)."""
    port = int(info["port"])
    keys = [check_public_key(k) for k in info.get("authorizedKeys") or []]
    job_key = info.get("jobKey")
    sftp = " ".join(SFTP_SERVERS)
    lines = [
        f'pai_ssh="$PAI_TASK_DIR/{TASK_SSH}"; (umask 077; mkdir -p "$pai_ssh/bin")',
        f'command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || echo "[pai ssh plugin] {NO_SSHD}" >&2',
        _heredoc('"$pai_ssh/authorized_keys"', "\n".join(keys)),
        _heredoc('"$pai_ssh/login.sh"', _LOGIN % {"sftp": sftp, "sftp_cases": "|".join(SFTP_SERVERS)}),
        'chmod 700 "$pai_ssh/login.sh"',
        # the daemon's config: this task's port, host key, keys and login script; no passwords, no PAM
        '{ printf "Port %s\\nListenAddress %s\\n" ' + str(port) + ' "${PAI_CURRENT_CONTAINER_IP:-127.0.0.1}"',
        f'  printf "HostKey %s\\nAuthorizedKeysFile %s\\nForceCommand %s\\n" "$pai_ssh/{HOST_KEY}" '
        '"$pai_ssh/authorized_keys" "$pai_ssh/login.sh"',
        '  printf "AllowUsers %s\\nPidFile none\\n" "$(id -un 2>/dev/null || echo root)"',
        '  printf "%s\\n" "PasswordAuthentication no" "KbdInteractiveAuthentication no" "PubkeyAuthentication yes" '
        '"UsePAM no" "StrictModes no" "PermitRootLogin prohibit-password" "PrintMotd no" "PrintLastLog no" '
        f'"X11Forwarding no" "AllowTcpForwarding yes" "Subsystem sftp {SFTP_SERVERS[0]}" '
        # bash run by sshd with SHLVL < 2 sources ~/.bashrc before our login script: the task's env comes first
        '"SetEnv SHLVL=1"',
        '} >"$pai_ssh/sshd_config"',
    ]
    if job_key:
        q = shlex.quote(job_key)
        lines += [
            # every task by name, as OpenPAI writes into /etc/ssh/ssh_config
            '{ for pai_t in $(echo "$PAI_TASK_ROLE_INSTANCES" | tr , " "); do',
            "    pai_r=${pai_t%%:*}; pai_i=${pai_t##*:}",
            '    eval "pai_h=\\${PAI_HOST_IP_${pai_r}_${pai_i}}; pai_p=\\${PAI_${pai_r}_${pai_i}_ssh_PORT}"',
            '    printf "Host %s-%s\\n  HostName %s\\n  Port %s\\n  User %s\\n" "$pai_r" "$pai_i" "$pai_h" '
            '"${pai_p%%,*}" "$(id -un 2>/dev/null || echo root)"',
            f'    printf "  IdentityFile %s\\n  IdentitiesOnly yes\\n  StrictHostKeyChecking no\\n" {q}',
            '    printf "  UserKnownHostsFile /dev/null\\n  LogLevel ERROR\\n"',
            "  done",
            '  [ -f "$HOME/.ssh/config" ] && printf "Host *\\n  Include %s\\n" "$HOME/.ssh/config"',
            '} >"$pai_ssh/ssh_config"',
            'for pai_c in ssh scp sftp; do pai_b=$(command -v $pai_c) && [ "$pai_b" != "$pai_ssh/bin/$pai_c" ] && '
            'printf \'#!/bin/sh\\nexec %s -F "%s" "$@"\\n\' "$pai_b" "$pai_ssh/ssh_config" >"$pai_ssh/bin/$pai_c" '
            '&& chmod 755 "$pai_ssh/bin/$pai_c"; done',
            'export PATH="$pai_ssh/bin:$PATH"',
        ]
    lines += [
        # the task's environment and working dir, for logins (sshd gives its sessions a clean environment)
        # bash's own `export -p` writes `declare -x`, which the login script's sh cannot read: POSIX form
        '(umask 077; if [ -n "${BASH_VERSION:-}" ]; then (set -o posix; export -p); else export -p; fi '
        '>"$pai_ssh/env.sh"; pwd >"$pai_ssh/workdir")',
    ]
    return "\n".join(lines)


def command(info: dict[str, Any]) -> str:
    """The service itself (run in the background by the task's supervisor): a host key, then sshd."""
    return (
        f'pai_ssh="$PAI_TASK_DIR/{TASK_SSH}"; pai_sshd=$(command -v sshd || echo /usr/sbin/sshd); '
        f'if [ ! -x "$pai_sshd" ]; then echo "{NO_SSHD}" >&2; '
        f'echo "{NO_SSHD}" >{taskdir.in_shell(taskdir.service_file("ssh", "missing"))}; exit 127; fi; '
        f'[ -f "$pai_ssh/{HOST_KEY}" ] || ssh-keygen -q -t ed25519 -N "" -f "$pai_ssh/{HOST_KEY}" || exit 1; '
        '[ "$(id -u)" = 0 ] && mkdir -p /run/sshd; '
        'exec "$pai_sshd" -D -e -f "$pai_ssh/sshd_config"'
    )


def barrier(info: dict[str, Any]) -> str:
    """Shell that holds the command until every other task's sshd lets the job key in (jobssh + sshbarrier)."""
    params = info.get("parameters") or {}
    if not (info.get("jobKey") and str(params.get("sshbarrier")).lower() == "true"):
        return ""
    timeout = params.get("sshbarrierTimeout", BARRIER_DEFAULT_MINUTES)
    valid = isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0
    minutes = timeout if valid else BARRIER_DEFAULT_MINUTES
    return "\n".join(
        [
            f'pai_deadline=$(( $(date +%s) + {int(minutes * 60)} )); pai_wait=""',
            'for pai_t in $(echo "$PAI_TASK_ROLE_INSTANCES" | tr , " "); do',
            '  [ "$pai_t" = "$PAI_CURRENT_TASK_ROLE_NAME:$PAI_TASK_INDEX" ] ||',
            '    pai_wait="$pai_wait ${pai_t%%:*}-${pai_t##*:}"',
            "done",
            'echo "pai ssh barrier: waiting for$pai_wait"',
            'while [ -n "$pai_wait" ]; do',
            '  pai_left=""',
            "  for pai_h in $pai_wait; do",
            '    ssh -o BatchMode=yes -o ConnectTimeout=5 "$pai_h" true </dev/null >/dev/null 2>&1 || '
            'pai_left="$pai_left $pai_h"',
            "  done",
            '  pai_wait=$pai_left; [ -z "$pai_wait" ] && break',
            '  if [ "$(date +%s)" -ge "$pai_deadline" ]; then',
            f'    echo "pai ssh barrier: timed out after {minutes:g} min; no ssh to:$pai_wait" >&2; '
            f"exit {EXIT_SSH_BARRIER}",
            "  fi",
            "  sleep 1",
            "done",
            'echo "pai ssh barrier: every task answers"',
        ]
    )


def mounts(own: dict[str, Any], job_dir: Path, view: TaskView) -> list[Mount]:
    """The job's key dir, read-only, where ``jobKey`` says (jobssh only; a container sees it through a mount)."""
    info = own.get("ssh") or {}
    return view.share(job_key_dir(job_dir), DOCKER_JOB_KEY_DIR, read_only=True) if info.get("jobKey") else []
