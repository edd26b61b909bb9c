"""What the sync and async clients share: the profile, the base url and token, retries and backoff.

The client never imports the embedded daemon: the ``local`` profile's daemon is reached (and started on first use)
through a starter (``common.starter``), given as ``starter=`` or registered by the cluster package. A daemon on this
machine is reached over its unix socket where it has one (``common/channel.py``: the token never crosses loopback
TCP); ``transport=`` is the httpx transport every request goes through instead (e.g. ``httpx.MockTransport`` in
tests)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TypedDict
from urllib.parse import quote, urljoin

import httpx

from ..common import channel
from ..common.home import os_user
from ..common.starter import Starter, StartError, Stopped, starter_for
from .errors import PaiError, RateLimited, ServerUnavailable, Unauthorized
from .locality import Locality, locality
from .profiles import Profile, ProfileError, get_profile
from .wire import Req, error_for

LOCAL_HINT = "start the local cluster with: pai cluster start"
LOCAL_DOWN = "LocalClusterDown"
"""The code of a ServerUnavailable that says the local cluster is not running and how to start it: words of this
client's own (not a cluster's answer), which a server may pass on to its browser."""


class ClientOptions(TypedDict, total=False):
    """The keyword options Client and AsyncClient share (each also takes its own kind of ``transport``)."""

    url: str | None
    token: str | None
    username: str | None
    home: Path | None
    timeout: float
    retries: int
    auto_start: bool
    starter: Starter | None


class ClientBase:
    """Resolves where to talk to: a profile (default: the default one), or an explicit url and token."""

    transport: object | None = None  # the httpx transport given to the client (Client, AsyncClient)

    def __init__(
        self,
        profile: str | Profile | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        username: str | None = None,
        home: Path | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        auto_start: bool = True,
        starter: Starter | None = None,
    ):
        self.home = home
        self.starter = starter
        if url:
            self.profile = Profile(name="(url)", url=url, username=username or "", token=token)
        elif isinstance(profile, Profile):
            self.profile = profile
        else:
            try:
                self.profile = get_profile(profile, home)
            except ProfileError as exc:
                raise PaiError(str(exc)) from None
        self.timeout = timeout
        self.retries = retries
        self.auto_start = auto_start
        self._server: Locality | None = locality(self.profile) if self.profile.is_local else None  # asked once
        self._url: str | None = None if self.profile.is_local else self.profile.url.rstrip("/")
        self._token: str | None = token or (None if self.profile.is_local else self.profile.resolved_token())
        self._socket: str | None = None if self.profile.is_local else self.profile.socket
        self.username = username or self.profile.username or (os_user() if self.profile.is_local else "")

    @property
    def where(self) -> str:
        return f"profile {self.profile.name!r} at {self._url or 'the embedded daemon'}"

    def _local(self) -> tuple[str, str, str | None]:
        """The embedded daemon's url, token and socket, starting it when nothing answers (first use)."""
        starter = self.starter or starter_for(self.profile.name)
        if starter is None:
            raise ServerUnavailable(
                "this installation has no embedded cluster; pick a profile with a url (pai profile add NAME URL)"
            )
        try:
            info = starter(self.home, start=self.auto_start)
        except Stopped as exc:
            raise ServerUnavailable(f"the local cluster is not running: {exc}", code=LOCAL_DOWN) from None
        except StartError as exc:
            raise ServerUnavailable(f"the local cluster could not be started: {exc}") from None
        if info is None:
            raise ServerUnavailable(f"the local cluster is not running; {LOCAL_HINT}", code=LOCAL_DOWN)
        return info["url"], info["token"], channel.announced(info)

    def socket_for(self, url: str) -> str | None:
        """The unix socket a request for ``url`` goes through: the daemon's on this machine (the ``local`` profile's
        from ``runtime.json``, another profile's ``socket``), for the daemon's own origin only; None: TCP. A
        client given its own ``transport`` (a mock) sends everything there."""
        if self._socket is None or self._url is None or self.transport is not None:
            return None
        return self._socket if channel.origin(url) == channel.origin(self._url) else None

    def _prepare(self, req: Req) -> tuple[str, dict[str, str]]:
        if self.profile.is_local and self._url is None:
            self._url, self._token, self._socket = self._local()
        headers = dict(req.headers)
        if req.location and channel.origin(request_url(self._url or "", req.path, True)) != channel.origin(
            self._url or ""
        ):
            req.auth = False  # a location on another host (a log manager, blob storage) never gets the REST token
        if req.auth:
            if not self._token:
                raise Unauthorized(f"{self.where} has no token; log in with: pai profile login {self.profile.name}")
            headers["Authorization"] = f"Bearer {self._token}"
        return self._url or "", headers

    def _unavailable(self, exc: Exception) -> ServerUnavailable:
        hint = LOCAL_HINT if self.profile.is_local else "check the url and your network, or pick another profile"
        if self.profile.is_local:
            self._url = None  # the daemon may come back on another port: look again next time
        return ServerUnavailable(f"nothing answers for {self.where} ({type(exc).__name__}: {exc}); {hint}")

    @staticmethod
    def _backoff(attempt: int) -> float:
        return min(0.2 * 2.0**attempt, 5.0) * (0.75 + random.random() / 2)

    @staticmethod
    def _retryable(err: PaiError) -> bool:
        return isinstance(err, RateLimited) or (err.status in (502, 503, 504))

    def _delay_for(self, err: PaiError, attempt: int) -> float:
        if isinstance(err, RateLimited) and err.retry_after is not None:
            return min(err.retry_after, 60.0)
        return self._backoff(attempt)

    def _outcome(
        self, req: Req, attempt: int, resp: httpx.Response | None = None, exc: Exception | None = None
    ) -> tuple[httpx.Response | None, float | None, PaiError | None]:
        """The retry policy, once for both clients: (response to return) or (seconds to wait, then try again)
        or (error to raise). Only idempotent calls are retried: after a transport error, a 429 (its
        Retry-After) or a 502/503/504."""
        if exc is not None:
            if self.profile.is_local:
                self._url = None  # stopped or moved: the next try (not only the next call) asks its starter again
            if req.idempotent and attempt < self.retries:
                return None, self._backoff(attempt), None
            return None, None, self._unavailable(exc)
        assert resp is not None
        if resp.status_code < 400:
            return resp, None, None
        err = error_for(resp, self.where)
        if req.idempotent and attempt < self.retries and self._retryable(err):
            return None, self._delay_for(err, attempt), None
        return None, None, err

    def __repr__(self) -> str:
        return f"{type(self).__name__}(profile={self.profile.name!r}, user={self.username!r})"


def tail_lines(text: str, final: bool) -> list[str]:
    """Complete lines of a polled tail; a last line still being written is held back until the task ends."""
    lines = text.split("\n")
    if lines and (lines[-1] == "" or not final):
        lines.pop()
    return lines


def request_url(base: str, path: str, location: bool = False) -> str:
    """A call's URL: its path under the cluster's base URL, or as it is when the call names a whole URL.

    A ``location`` (a log URI the server handed out) is resolved as a browser would: a host-relative one
    (OpenPAI's ``/log-manager/...``) against the server's origin, not under a ``/rest-server`` base path."""
    if location:
        return urljoin(base.rstrip("/") + "/", path)
    return base + path if path.startswith("/") else path


def terminal_url(base: str, path: str, role: str, index: int) -> str:
    ws = "wss://" + base[len("https://") :] if base.startswith("https://") else "ws://" + base.split("://", 1)[-1]
    return f"{ws}{path}/tasks/{quote(role, safe='')}/{index}/terminal"
