"""The jobs sidebar's profile switch: ``GET pai/api/profiles`` lists the Jupyter user's cluster profiles
(their own ``clusters.yaml``: name, URL, user, which is the default and which this server shows now; never a
token) and ``PUT pai/api/profiles/current`` ``{"name": …}`` makes this server show and proxy that profile's
jobs from now on (one Jupyter server is one user, so the choice is server-side, kept until it is changed
or the server restarts); an unknown name is 404. Writes need ``_xsrf`` when cookie-authenticated.
"""

from __future__ import annotations

from typing import Any

from tornado import web

from ..client.profiles import ProfileError, load_profiles
from .answers import ProfileChoice, ProfileInfo, ProfileList
from .common import PaiHTTPError
from .lab_base import LabHandler


def profile_list(current: str) -> list[ProfileInfo]:
    try:
        profiles = load_profiles()
    except ProfileError as exc:
        raise PaiHTTPError(500, f"the profiles file cannot be read: {exc}", code="ProfileError") from None
    out: list[ProfileInfo] = []
    for p in profiles:
        public = p.public()
        out.append(
            {
                "name": p.name,
                "url": public["url"],
                "username": public["username"],
                "default": p.default,
                "current": p.name == current,
            }
        )
    return out


class ProfilesHandler(LabHandler):
    @web.authenticated
    async def get(self) -> None:
        answer: ProfileList = {"current": self.registry.current, "profiles": profile_list(self.registry.current)}
        self.send(answer)


class CurrentProfileHandler(LabHandler):
    @web.authenticated
    async def put(self) -> None:
        body = self.get_json_body()
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            raise PaiHTTPError(400, 'send {"name": "<profile name>"}', code="BadRequest")
        if name not in {p["name"] for p in profile_list(self.registry.current)}:
            raise PaiHTTPError(404, "no such profile", code="NotFound")
        client = self.registry.select(name)
        self.log.info("pai_jupyter: the server extension now shows profile %r (user %r)", name, client.username)
        answer: ProfileChoice = {"current": name, "user": client.username}
        self.send(answer)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [
        (pai + "/api/profiles", ProfilesHandler, args),
        (pai + "/api/profiles/current", CurrentProfileHandler, args),
    ]
