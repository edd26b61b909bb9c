"""SSH routes of the embedded cluster: the user's public keys, a job's SSH info, the job's private key.

``/api/v2/local/ssh-keys`` GET (the caller's keys), POST ``{"title", "value"}`` (201), ``/api/v2/local/ssh-keys/
{title}`` DELETE; ``/api/v2/local/jobs/{user}~{name}/ssh`` GET (where each task's sshd listens, who logs in, the
job key's fingerprint; OpenPAI v1's ``{containers: [{id, sshIp, sshPort}], keyPair}`` with more); ``.../ssh/key``
GET: the job's private key, to the job's owner only (not even an admin). Same bearer auth as every route.

Each container's ``hostKey`` is the public host key its sshd reported, for clients to pin. Whatever a task can
write (its ``.missing`` note, its host key) is read through ``safeio`` and the job key through ``jobkey``: a
link a task planted there is never followed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ...common import safeio
from ..core.accounts import AccountError
from ..core.errors import BadRequest, NotFoundError
from ..core.store import JobCore, loads
from ..paths import os_user
from ..runtime import taskdir
from ..task import jobkey, sshd
from .base import Base, Route

if TYPE_CHECKING:
    from ..core.service import Cluster

TITLE_MAX = 100
KEY_MAX = 8192  # an RSA-16384 key is about 2,800; every task of the user's jobs with the plugin gets them all


def _login_user(cluster: Cluster, user: str) -> str:
    """Who logs into the user's tasks: the runtime says (root in a container, else the account they run as)."""
    try:
        run_as = cluster.accounts.run_as(user)
    except AccountError:
        run_as = None
    return cluster.runtime.login_account(run_as, os_user())


class SshKeys(Base):
    """The caller's stored public keys: every task with the ssh plugin lets them in."""

    def get(self) -> None:
        self.write_json(sshd.load_user_keys(self.cluster.user_home(self.user["name"])))

    def post(self) -> None:
        body = self.json_body()
        title, value = body.get("title"), body.get("value")
        if not isinstance(title, str) or not title.strip() or len(title) > TITLE_MAX or "/" in title:
            raise BadRequest(f"title must be a non-empty string of at most {TITLE_MAX} characters, without '/'")
        if isinstance(value, str) and len(value) > KEY_MAX:
            raise BadRequest(f"a public key has at most {KEY_MAX} characters; this one has {len(value)}")
        try:
            key = sshd.check_public_key(value if isinstance(value, str) else "")
        except sshd.KeyError_ as exc:
            raise BadRequest(str(exc)) from None
        home = self.cluster.user_home(self.user["name"])
        keys = sshd.load_user_keys(home)
        if any(k.get("title") == title.strip() for k in keys):
            raise BadRequest(f"a key titled {title.strip()!r} exists; remove it first or choose another title")
        if len(keys) >= sshd.MAX_KEYS:
            raise BadRequest(f"at most {sshd.MAX_KEYS} keys per user")
        entry = {"title": title.strip(), "value": key, "time": int(time.time() * 1000)}
        sshd.save_user_keys(home, [*keys, entry])
        self.write_json(entry, 201)


class SshKey(Base):
    def delete(self, title: str) -> None:
        home = self.cluster.user_home(self.user["name"])
        keys = sshd.load_user_keys(home)
        left = [k for k in keys if k.get("title") != title]
        if len(left) == len(keys):
            raise NotFoundError(f"no ssh key titled {title!r}")
        sshd.save_user_keys(home, left)
        self.write_json({"message": f"ssh key {title!r} removed"})


def ssh_info(cluster: Cluster, row: JobCore) -> dict[str, Any]:
    job = cluster.job_model(row)
    params = sshd.plugin(job)
    if params is None:
        raise NotFoundError(
            f"job {row['user']}~{row['name']} has no ssh plugin "
            "(add `- plugin: ssh` under extras.com.microsoft.pai.runtimeplugin)"
        )
    planned = sshd.planned(job)
    containers = []
    for t in cluster.store.tasks(row["id"], row["attempt"]):
        info = (loads(t["services"], {}) or {}).get("ssh")
        if (t["role"], t["idx"]) not in planned or not info:
            continue
        td = Path(t["task_dir"]) if t["task_dir"] else None
        missing = safeio.read_beneath(td, taskdir.service_file("ssh", "missing"), 4096) if td else None
        containers.append(
            {
                "id": f"{t['role']}-{t['idx']}",
                "taskRole": t["role"],
                "taskIndex": t["idx"],
                "taskState": t["state"],
                "sshIp": t["host_ip"] or "127.0.0.1",
                "sshPort": info["port"],
                "hostKey": sshd.reported_host_key(td) if td else None,
                "problem": (missing or b"").decode(errors="replace").strip() or None,
            }
        )
    raw = jobkey.read(cluster.job_dir(row["user"], row["name"]), jobkey.PUBLIC)
    public = raw.decode(errors="replace").strip() if raw else None
    base = f"/api/v2/local/jobs/{quote(row['user'], safe='')}~{quote(row['name'], safe='')}/ssh/key"
    return {
        "user": _login_user(cluster, row["user"]),
        "jobssh": bool(planned) and bool(next(iter(planned.values()))["ssh"]["jobssh"]),
        "containers": containers,
        "keyPair": {
            "publicKey": public,
            "fingerprint": jobkey.fingerprint(public) if public else None,
            "privateKeyFileName": f"{row['user']}~{row['name']}.key",
            "privateKeyDirectDownloadLink": base if public else None,
        },
    }


class JobSsh(Base):
    def get(self, user: str, name: str) -> None:
        self.write_json(ssh_info(self.cluster, self.own_job(user, name)))


class JobSshKey(Base):
    """The job's private key, to its owner only; made with the job's first task."""

    def get(self, user: str, name: str) -> None:
        if user != self.user["name"]:
            raise NotFoundError(f"job {user}~{name} was not found")
        row = self.own_job(user, name)
        if sshd.plugin(self.cluster.job_model(row)) is None:
            raise NotFoundError(f"job {user}~{name} has no ssh plugin, so no key")
        key = jobkey.read(self.cluster.job_dir(user, name))
        if key is None:
            raise NotFoundError(f"job {user}~{name} has no key yet: it is made when its first task starts")
        self.set_header("Content-Type", "application/x-pem-file")
        self.set_header("Content-Disposition", f'attachment; filename="{quote(user)}~{quote(name)}.key"')
        self.finish(key)


def routes(job: str, args: dict[str, Any]) -> list[Route]:
    return [
        (r"/api/v2/local/ssh-keys", SshKeys, args),
        (r"/api/v2/local/ssh-keys/([^/]+)", SshKey, args),
        (job + r"/ssh", JobSsh, args),
        (job + r"/ssh/key", JobSshKey, args),
    ]
