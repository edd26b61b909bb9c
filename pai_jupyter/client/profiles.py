"""Cluster profiles in ``$PAI_JUPYTER_HOME/clusters.yaml``: name, url, username, token or token_file, default,
and socket (a daemon on this machine: its unix socket, which the client sends the requests for the url through).

The ``local`` profile always exists and means the embedded daemon: its url, socket and admin token come from
``local/runtime.json``, and it is started on first use when nothing answers. Inside a JupyterHub user's server that
PAISpawner started (docs/hub.md), the ``hub`` profile exists too: the cluster's url from ``PAI_HUB_CLUSTER_URL``
(and, for a server on the daemon's own machine, its unix socket from ``PAI_HUB_CLUSTER_SOCKET``: a daemon restarted
on another port is still found there), the server's own Hub token (``JUPYTERHUB_API_TOKEN``) as its token, never
written to clusters.yaml; the spawner makes it the one used (``PAI_PROFILE=hub``). Tokens are never printed.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from ..common.home import os_user, profiles_file

LOCAL = "local"
FIELDS = ("name", "url", "username", "token", "token_file", "default", "socket")  # of an entry in clusters.yaml
HUB = "hub"
HUB_URL_ENV = "PAI_HUB_CLUSTER_URL"  # set by PAISpawner in a Hub user's server: the cluster as the server reaches it
HUB_SOCKET_ENV = "PAI_HUB_CLUSTER_SOCKET"  # and, on the daemon's machine, its unix socket (common/channel.py)
HUB_TOKEN_ENV = "JUPYTERHUB_API_TOKEN"  # the server's Hub token, which the cluster takes as its user's


class ProfileError(ValueError):
    pass


@dataclass
class Profile:
    name: str
    url: str = ""
    username: str = ""
    token: str | None = None
    token_file: str | None = None
    default: bool = False
    socket: str | None = None  # the daemon's unix socket on this machine: requests for ``url`` go through it
    token_env: str | None = None  # the environment variable holding the token (the ``hub`` profile's)

    @property
    def is_local(self) -> bool:
        return self.name == LOCAL

    def resolved_token(self) -> str | None:
        if self.token:
            return self.token
        if self.token_env:
            return os.environ.get(self.token_env) or None
        if self.token_file:
            try:
                return Path(self.token_file).expanduser().read_text().strip() or None
            except OSError as exc:
                raise ProfileError(f"profile {self.name!r}: cannot read token_file {self.token_file}: {exc}") from None
        return None

    def public(self) -> dict[str, Any]:
        """What may be shown: everything but the token itself."""
        return {
            "name": self.name,
            "url": self.url or ("(embedded daemon)" if self.is_local else ""),
            "username": self.username or (os_user() if self.is_local else ""),
            "token": "set" if (self.token or self.token_file or self.token_env or self.is_local) else "not set",
            "default": self.default,
        }

    def __repr__(self) -> str:  # never show the token
        return f"Profile(name={self.name!r}, url={self.url!r}, username={self.username!r}, default={self.default})"


def load_profiles(home: Path | None = None) -> list[Profile]:
    path = profiles_file(home)
    raw: Any = {}
    if path.exists():
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ProfileError(f"{path} is not valid YAML: {exc}") from None
    entries = raw.get("clusters", []) if isinstance(raw, dict) else []
    out: list[Profile] = []
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("name"):
            raise ProfileError(f"{path}: every entry under clusters needs a name")
        known = {k: entry[k] for k in FIELDS if k in entry}
        out.append(Profile(**known))
    if not any(p.is_local for p in out):
        out.insert(0, Profile(name=LOCAL))
    hub = hub_profile()
    if hub is not None and not any(p.name == HUB for p in out):
        out.append(hub)
    if not any(p.default for p in out):
        next(p for p in out if p.is_local).default = True
    return out


def hub_profile() -> Profile | None:
    """The ``hub`` profile of a Hub user's server (from its environment), else None."""
    url = os.environ.get(HUB_URL_ENV)
    if not url:
        return None
    user = os.environ.get("JUPYTERHUB_USER", "")
    socket = os.environ.get(HUB_SOCKET_ENV) or None
    return Profile(name=HUB, url=url, username=user, token_env=HUB_TOKEN_ENV, socket=socket)


def save_profiles(profiles: list[Profile], home: Path | None = None) -> None:
    path = profiles_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = [p for p in profiles if p.token_env is None]  # the environment's hub profile is never written
    data = {"clusters": [{k: v for k, v in asdict(p).items() if v not in (None, "", False)} for p in kept]}
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    os.replace(tmp, path)


def get_profile(name: str | None = None, home: Path | None = None) -> Profile:
    """The named profile, else $PAI_PROFILE, else the default one."""
    profiles = load_profiles(home)
    wanted = name or os.environ.get("PAI_PROFILE")
    if wanted:
        for p in profiles:
            if p.name == wanted:
                return p
        raise ProfileError(
            f"no profile named {wanted!r} (known: {', '.join(p.name for p in profiles)}); "
            f"add one with: pai profile add NAME URL"
        )
    return next(p for p in profiles if p.default)


def upsert_profile(profile: Profile, home: Path | None = None) -> None:
    profiles = [p for p in load_profiles(home) if p.name != profile.name]
    if profile.default:
        for p in profiles:
            p.default = False
    profiles.append(profile)
    save_profiles(profiles, home)


def use_profile(name: str, home: Path | None = None) -> None:
    profiles = load_profiles(home)
    if name not in {p.name for p in profiles}:
        raise ProfileError(f"no profile named {name!r}")
    for p in profiles:
        p.default = p.name == name
    save_profiles(profiles, home)


def remove_profile(name: str, home: Path | None = None) -> None:
    if name == LOCAL:
        raise ProfileError("the local profile always exists and cannot be removed")
    profiles = load_profiles(home)
    if name not in {p.name for p in profiles}:
        raise ProfileError(f"no profile named {name!r}")
    save_profiles([p for p in profiles if p.name != name], home)
