"""Login as OpenPAI's basic authn does it, with what OpenPAI leaves out: password hashing off the event loop and
a limit on failed logins per user and per client.

``POST /api/v[12]/authn/basic/login`` (and v1's ``POST /api/v1/token``) take JSON or form-urlencoded
``username`` / ``password`` / ``expiration``; an unknown user is 400 ``NoUserError``, a wrong password 400
``IncorrectPasswordError`` (OpenPAI's answers). Past ``LoginLimiter``'s failures in a window, 429
``TooManyRequestsError`` with ``Retry-After``, before any hashing is done.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import OrderedDict, deque
from typing import Any
from urllib.parse import parse_qs

import tornado.ioloop

from ..core.errors import BadRequest, IncorrectPasswordError, NoUserError, TooManyRequestsError
from ..core.store import Store, check_password

USERNAME = re.compile(r"^[\w.-]+$")  # OpenPAI's tokenPostInputSchema
MIN_EXPIRATION, MAX_EXPIRATION = 60, 7 * 24 * 3600


class LoginLimiter:
    """Failed logins per key (``user:<name>``, ``client:<ip>``, or ``client:uid <n>`` over the unix socket) in a
    sliding window; bounded memory. A client gets more tries than a user name: every local user of a loopback
    daemon shares one address over TCP."""

    def __init__(self, per_user: int = 10, per_client: int = 100, window: float = 300.0, max_keys: int = 10_000):
        self.per_user = per_user
        self.per_client = per_client
        self.window = window
        self.max_keys = max_keys
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _limit(self, key: str) -> int:
        return self.per_user if key.startswith("user:") else self.per_client

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def retry_after(self, keys: list[str]) -> int:
        """Seconds until a login for these keys may be tried again (0: now)."""
        now = time.monotonic()
        wait = 0.0
        for key in keys:
            times, limit = self._recent(key, now), self._limit(key)
            if len(times) >= limit:
                wait = max(wait, times[len(times) - limit] + self.window - now)
        return math.ceil(wait) if wait > 0 else 0

    def failed(self, keys: list[str]) -> None:
        now = time.monotonic()
        for key in keys:
            times = self._failures.pop(key, None) or deque(maxlen=self._limit(key))
            times.append(now)
            self._failures[key] = times
        while len(self._failures) > self.max_keys:
            self._failures.popitem(last=False)

    def succeeded(self, keys: list[str]) -> None:
        """Undo the try counted for a login that succeeded (and forget the user's earlier failures)."""
        for key in keys:
            times = self._failures.get(key)
            if times and key.startswith("user:"):
                del self._failures[key]
            elif times:
                times.pop()


def login_body(content_type: str, body: bytes) -> dict[str, Any]:
    """The login fields from a JSON or a form-urlencoded body (the swagger's only type; OpenPAI's SDK sends it)."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise BadRequest("the body is not valid UTF-8") from None
        return {k: v[-1] for k, v in fields.items()}
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise BadRequest("the body must be JSON or form-urlencoded username and password") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def check_fields(data: dict[str, Any]) -> tuple[str, str]:
    """OpenPAI's rules: a username of word characters, '.' and '-'; a password of at least 6 characters;
    ``expiration`` in seconds, 60 .. 7 days (accepted; our login tokens last until revoked)."""
    username, password = data.get("username"), data.get("password")
    if not isinstance(username, str) or not USERNAME.match(username):
        raise BadRequest('"username" is required: letters, digits, "_", "." and "-"')
    if not isinstance(password, str) or len(password) < 6:
        raise BadRequest('"password" is required and has at least 6 characters')
    expiration = data.get("expiration")
    if expiration is not None:
        try:
            seconds = int(expiration)
        except (TypeError, ValueError):
            raise BadRequest('"expiration" must be a whole number of seconds') from None
        if not MIN_EXPIRATION <= seconds <= MAX_EXPIRATION:
            raise BadRequest(f'"expiration" must be between {MIN_EXPIRATION} and {MAX_EXPIRATION} seconds')
    return username, password


async def login(store: Store, limiter: LoginLimiter, data: dict[str, Any], client: str) -> dict[str, Any]:
    """Check the password (in a worker thread: PBKDF2 takes tens of milliseconds) and issue a token."""
    username, password = check_fields(data)
    keys = [f"user:{username}", f"client:{client}"]
    wait = limiter.retry_after(keys)
    if wait:
        raise TooManyRequestsError(f"too many failed logins; try again in {wait} s", retry_after=wait)
    limiter.failed(keys)  # counted before the check: tries made at once cannot all slip under the limit
    user = store.user(username)
    if user is None:
        raise NoUserError(f"User {username} is not found.", status=400)
    ok = await tornado.ioloop.IOLoop.current().run_in_executor(None, check_password, password, user["password_hash"])
    if not ok:
        raise IncorrectPasswordError("Password is incorrect.")
    limiter.succeeded(keys)
    token = store.new_token(user["name"], "login")
    return {"token": token, "user": user["name"], "admin": bool(user["admin"]), "hasGitHubPAT": False}
