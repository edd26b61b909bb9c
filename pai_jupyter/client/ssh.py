"""SSH into a job's tasks, for either kind of profile: where each task's sshd is, which key, the commands.

On the embedded cluster the daemon says where (``/api/v2/local/jobs/{job}/ssh``) and hands the job's private key
to its owner, saved as ``$PAI_JUPYTER_HOME/ssh/<user>~<job>.key`` (mode 0600). On a remote OpenPAI the info
is built as OpenPAI's portal does: the job config must have the ``ssh`` plugin, each task's ``containerIp``
and ``containerPorts.ssh`` from the job detail, user ``root``, and the user's own private key (``identity``,
else ``~/.ssh/id_ed25519`` or ``~/.ssh/id_rsa``) whose public half is in OpenPAI (profile ``sshKeys`` or
``userssh``).

Host keys are checked, per job, in ``$PAI_JUPYTER_HOME/ssh/known_hosts/<profile>/<user>~<job>``: on the embedded
cluster the file holds the host key each task's sshd reported through the daemon's authenticated API (pinned:
anything else on that port is refused); a remote OpenPAI reports none, so the first key seen is kept and a
changed one refused (trust on first use, OpenSSH's ``accept-new``).

Each function takes a Client or an AsyncClient and returns a value or an awaitable accordingly.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import shlex
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload
from urllib.parse import quote

import httpx
import yaml

from ..common.home import pai_home
from .calls import Calls, JobRef
from .errors import BadRequest, NotSupported
from .wire import Op, Req, json_list, json_object

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .sync import Client

T = TypeVar("T")


@dataclass
class SshTarget:
    """One task's sshd and how to log in. ``host_key``: the key its sshd reported (pinned); ``known_hosts``: the
    job's file of trusted host keys; ``trust_first``: no key reported (remote OpenPAI), the first one seen is kept."""

    job: str
    role: str
    index: int
    state: str
    host: str | None
    port: int | None
    user: str
    key: str | None
    problem: str | None = None
    host_key: str | None = None
    known_hosts: str | None = None
    trust_first: bool = False

    @property
    def alias(self) -> str:
        return f"pai-{self.job.replace('~', '-')}-{self.role}-{self.index}"

    def _host_options(self) -> list[tuple[str, str]]:
        """(name, value) of ssh's host key options, the value as ssh's config parser reads it."""
        if self.known_hosts is None:
            return []  # built by hand: the ssh client's own settings decide
        path = self.known_hosts.replace("%", "%%")  # ssh expands %-tokens in this path
        return [
            ("StrictHostKeyChecking", "accept-new" if self.trust_first else "yes"),
            ("UserKnownHostsFile", f'"{path}"'),
        ]

    def ssh_argv(self, command: str | None = None) -> list[str]:
        if not self.host or not self.port:
            raise BadRequest(f"{self.job} {self.role}[{self.index}] has no ssh address yet (it is {self.state})")
        if self.known_hosts is not None and not self.trust_first and not self.host_key:
            raise BadRequest(
                f"{self.job} {self.role}[{self.index}]: its sshd has not reported its host key yet (it is "
                "starting); try again in a moment"
            )
        argv = ["ssh", "-p", str(self.port)]
        for name, value in self._host_options():
            argv += ["-o", f"{name}={value}"]
        if self.key:
            argv += ["-i", self.key, "-o", "IdentitiesOnly=yes"]
        return [*argv, f"{self.user}@{self.host}", *([command] if command else [])]

    def commands(self) -> dict[str, str]:
        key = f" -i {shlex.quote(self.key)}" if self.key else ""
        opts = "".join(f" -o {shlex.quote(f'{name}={value}')}" for name, value in self._host_options())
        return {
            "ssh": f"ssh{key} -p {self.port}{opts} {self.user}@{self.host}",
            "scp": f"scp{key} -P {self.port}{opts} LOCAL_FILE {self.user}@{self.host}:",
            "config": "\n".join(
                [
                    f"Host {self.alias}",
                    f"  HostName {self.host}",
                    f"  Port {self.port}",
                    f"  User {self.user}",
                    *([f"  IdentityFile {self.key}", "  IdentitiesOnly yes"] if self.key else []),
                    *(f"  {name} {value}" for name, value in self._host_options()),
                ]
            ),
        }

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), **(self.commands() if self.host and self.port else {})}


def known_hosts_path(job_id: str, profile: str, home: Path | None = None) -> Path:
    """The job's file of trusted host keys (per profile: job ids of two clusters may be the same)."""
    where = (home or pai_home()) / "ssh" / "known_hosts" / re.sub(r"[^\w.-]", "_", profile)
    return where / re.sub(r"[^\w.~-]", "_", job_id)


def _host_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _names_match(field: str, name: str) -> bool:
    """A known_hosts host field (plain names, or ``|1|salt|hash`` as OpenSSH's HashKnownHosts writes them)."""
    for pattern in field.split(","):
        if pattern.startswith("|1|"):
            try:
                salt, digest = (base64.b64decode(x) for x in pattern[3:].split("|"))
            except ValueError:
                continue
            if hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest):
                return True
        elif pattern == name:
            return True
    return False


def trusted_host_keys(target: SshTarget) -> list[str]:
    """The host keys ``target``'s sshd may show: the one its cluster reported, else those kept for its address in
    the job's known_hosts file; [] when none is known yet (first use)."""
    if target.host_key:
        return [target.host_key]
    if not target.known_hosts or not target.host or not target.port:
        return []
    name = _host_name(target.host, target.port)
    try:
        lines = Path(target.known_hosts).read_text().splitlines()
    except OSError:
        return []
    keys = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and not parts[0].startswith(("#", "@")) and _names_match(parts[0], name):
            keys.append(f"{parts[1]} {parts[2]}")
    return keys


def remember_host_key(target: SshTarget, public_key: str) -> None:
    """Trust on first use: keep the key ``target``'s sshd showed in the job's known_hosts file."""
    if not target.known_hosts or not target.host or not target.port:
        return
    path = Path(target.known_hosts)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    kind, blob = public_key.split()[:2]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(f"{_host_name(target.host, target.port)} {kind} {blob}\n")


def _pin(path: Path, targets: list[SshTarget]) -> None:
    """The job's known_hosts file: exactly the host keys its tasks reported (ports are reused by later jobs)."""
    lines = [
        f"{_host_name(t.host, t.port)} {' '.join(t.host_key.split()[:2])}\n"
        for t in targets
        if t.host and t.port and t.host_key
    ]
    _write_private(path, "".join(lines).encode())


def targets_html(targets: list[SshTarget]) -> str:
    """SSH info as HTML (escaped): for notebooks and the job list widget."""
    import html

    rows = []
    for t in targets:
        head = f"<b>{html.escape(t.role)}[{t.index}]</b> ({html.escape(t.state)})"
        if t.problem:
            rows.append(f"<p>{head}: {html.escape(t.problem)}</p>")
        elif not t.host or not t.port:
            rows.append(f"<p>{head}: no ssh address yet</p>")
        else:
            c = t.commands()
            rows.append(
                f"<p>{head} key <code>{html.escape(t.key or '(none: use your own)')}</code></p>"
                f"<pre>{html.escape(c['ssh'])}\n{html.escape(c['scp'])}\n\n# ~/.ssh/config\n"
                f"{html.escape(c['config'])}</pre>"
            )
    return "".join(rows) or "<i>no task with ssh</i>"


def key_path(job_id: str, home: Path | None = None) -> Path:
    return (home or pai_home()) / "ssh" / f"{job_id}.key"


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def default_identity() -> str | None:
    for name in ("id_ed25519", "id_ecdsa", "id_rsa"):
        p = Path.home() / ".ssh" / name
        if p.exists():
            return str(p)
    return None


@overload
def _run(client: Client, op: Op[T]) -> T: ...
@overload
def _run(client: AsyncClient, op: Op[T]) -> Coroutine[Any, Any, T]: ...
def _run(client: Client | AsyncClient, op: Op[T]) -> T | Coroutine[Any, Any, T]:
    """Drive ``op`` with the client: a value from a Client, an awaitable from an AsyncClient."""
    return client._drive(op)


def _targets(client: Calls, job: JobRef, identity: str | None) -> Op[list[SshTarget]]:
    job_id = client.job_id(job)
    user, _, name = job_id.partition("~")
    local = yield from client._is_local_server()
    if local:
        path = f"/api/v2/local/jobs/{quote(user, safe='')}~{quote(name, safe='')}/ssh"
        resp = yield Req("GET", path)
        info = json_object(resp)
        key = identity
        if key is None and info["keyPair"].get("privateKeyDirectDownloadLink") and user == client.username:
            data = yield Req("GET", info["keyPair"]["privateKeyDirectDownloadLink"])
            saved = key_path(job_id, client.home)
            _write_private(saved, data.content)
            key = str(saved)
        known = known_hosts_path(job_id, client.profile.name, client.home)
        targets = [
            SshTarget(
                job_id,
                c["taskRole"],
                c["taskIndex"],
                c["taskState"],
                c["sshIp"],
                c["sshPort"],
                info["user"],
                key,
                c.get("problem"),
                host_key=c.get("hostKey"),
                known_hosts=str(known),
            )
            for c in info["containers"]
        ]
        _pin(known, targets)
        return targets
    detail = yield from client._detail(job)  # first: a missing job is JobNotFound here, a missing config below
    config = yield from client._config(job)
    doc = yaml.safe_load(config) or {}
    plugins = ((doc.get("extras") or {}).get("com.microsoft.pai.runtimeplugin") or []) if isinstance(doc, dict) else []
    if not any(isinstance(p, dict) and p.get("plugin") == "ssh" for p in plugins):
        raise NotSupported(
            f"job {job_id} has no ssh plugin, so its tasks run no sshd (add `- plugin: ssh` under "
            "extras.com.microsoft.pai.runtimeplugin)"
        )
    key = identity or default_identity()
    tofu = str(known_hosts_path(job_id, client.profile.name, client.home))
    out: list[SshTarget] = []
    for t in detail.tasks:
        port = str((t.container_ports or {}).get("ssh") or "").split(",")[0]
        out.append(
            SshTarget(
                job_id,
                t.role,
                t.task_index,
                t.task_state,
                t.container_ip,
                int(port) if port.isdigit() else None,
                "root",
                key,
                known_hosts=tofu,
                trust_first=True,
            )
        )
    return out


def _pick(targets: list[SshTarget], role: str | None, index: int | None) -> list[SshTarget]:
    picked = [t for t in targets if (role is None or t.role == role) and (index is None or t.index == index)]
    if not picked:
        raise BadRequest(
            f"no task {role or '*'}[{'*' if index is None else index}] with ssh "
            f"(tasks: {', '.join(f'{t.role}[{t.index}]' for t in targets) or 'none'})"
        )
    return picked


@overload
def ssh_info(
    client: Client, job: JobRef, *, role: str | None = None, index: int | None = None, identity: str | None = None
) -> list[SshTarget]: ...
@overload
def ssh_info(
    client: AsyncClient, job: JobRef, *, role: str | None = None, index: int | None = None, identity: str | None = None
) -> Coroutine[Any, Any, list[SshTarget]]: ...
def ssh_info(
    client: Client | AsyncClient,
    job: JobRef,
    *,
    role: str | None = None,
    index: int | None = None,
    identity: str | None = None,
) -> list[SshTarget] | Coroutine[Any, Any, list[SshTarget]]:
    """Every task's SshTarget (or those of ``role`` / ``index``); downloads the job key on the embedded cluster."""

    def op() -> Op[list[SshTarget]]:
        targets = yield from _targets(client, job, identity)
        return _pick(targets, role, index)

    return _run(client, op())


def _key_call(client: Calls, job: JobRef) -> Op[bytes]:
    """The job's private key (embedded cluster only; the daemon answers it to the job's owner only)."""
    user, _, name = client.job_id(job).partition("~")
    yield from client._local_path(job, "the job's ssh key")
    resp = yield Req("GET", f"/api/v2/local/jobs/{quote(user, safe='')}~{quote(name, safe='')}/ssh/key")
    return resp.content


@overload
def job_key(client: Client, job: JobRef) -> bytes: ...
@overload
def job_key(client: AsyncClient, job: JobRef) -> Coroutine[Any, Any, bytes]: ...
def job_key(client: Client | AsyncClient, job: JobRef) -> bytes | Coroutine[Any, Any, bytes]:
    """The job's private key as bytes (for a download the caller serves itself; nothing is written)."""
    return _run(client, _key_call(client, job))


@overload
def download_key(client: Client, job: JobRef) -> Path: ...
@overload
def download_key(client: AsyncClient, job: JobRef) -> Coroutine[Any, Any, Path]: ...
def download_key(client: Client | AsyncClient, job: JobRef) -> Path | Coroutine[Any, Any, Path]:
    """Save the job's private key (owner only) as ``$PAI_JUPYTER_HOME/ssh/<job>.key``, mode 0600; its path."""

    def op() -> Op[Path]:
        key = yield from _key_call(client, job)
        out = key_path(client.job_id(job), client.home)
        _write_private(out, key)
        return out

    return _run(client, op())


def _keys_call(client: Calls, req: Req, read: Callable[[httpx.Response], T]) -> Op[T]:
    """A call on the user's stored public keys (embedded cluster only): the answer, as ``read`` reads it."""
    yield from client._local_path("x", "stored ssh keys")
    resp = yield req
    return read(resp)


@overload
def list_keys(client: Client) -> list[dict[str, Any]]: ...
@overload
def list_keys(client: AsyncClient) -> Coroutine[Any, Any, list[dict[str, Any]]]: ...
def list_keys(client: Client | AsyncClient) -> list[dict[str, Any]] | Coroutine[Any, Any, list[dict[str, Any]]]:
    return _run(client, _keys_call(client, Req("GET", "/api/v2/local/ssh-keys"), json_list))


@overload
def add_key(client: Client, title: str, value: str) -> dict[str, Any]: ...
@overload
def add_key(client: AsyncClient, title: str, value: str) -> Coroutine[Any, Any, dict[str, Any]]: ...
def add_key(
    client: Client | AsyncClient, title: str, value: str
) -> dict[str, Any] | Coroutine[Any, Any, dict[str, Any]]:
    req = Req("POST", "/api/v2/local/ssh-keys", json={"title": title, "value": value}, idempotent=False)
    return _run(client, _keys_call(client, req, json_object))


@overload
def remove_key(client: Client, title: str) -> dict[str, Any]: ...
@overload
def remove_key(client: AsyncClient, title: str) -> Coroutine[Any, Any, dict[str, Any]]: ...
def remove_key(client: Client | AsyncClient, title: str) -> dict[str, Any] | Coroutine[Any, Any, dict[str, Any]]:
    req = Req("DELETE", f"/api/v2/local/ssh-keys/{quote(title, safe='')}")
    return _run(client, _keys_call(client, req, json_object))
