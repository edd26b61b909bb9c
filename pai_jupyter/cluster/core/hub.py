"""The daemon's link to a JupyterHub (docs/hub.md): a Hub user is a platform user, with no token to copy.

Configured by ``local/hub.yaml`` (``pai hub start`` writes it; a site with its own Hub writes it by hand), read again
whenever it changes, so a running daemon is linked and unlinked without a restart:

    apiUrl: http://127.0.0.1:8081/hub/api   # the Hub's REST API as the daemon reaches it
    tokenFile: /root/.pai-jupyter/hub/service-token   # the pai service's API token (0600)
    service: pai                            # the service's name: users need access:services!service=pai
    accounts: dedicated                     # or "own": a Hub user's tasks run as the OS account of that name (PAM)
    reconcileSeconds: 300                   # how often Hub-made users the Hub no longer has are offboarded

The daemon trusts the Hub only through the Hub's own answers. A token it did not issue is shown to the Hub
(``GET {apiUrl}/user`` with that token, as JupyterHub's HubAuth asks); the Hub names its owner, whether they are
its admin, and its scopes, which must hold the service's access scope (http/hubauth.py decides). The service's
own token only reads the Hub's user list: the users the Hub made (``hub_users``) and no longer has are offboarded
(core/offboard.py), each only after the Hub answered 404 for that very name, so neither a leaked service token
nor a Hub that answers badly removes a user who still exists. Tokens are never logged; the cache keeps hashes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

import yaml
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from .errors import ApiError
from .offboard import remove_user

if TYPE_CHECKING:
    from .service import Cluster
    from .store import TokenUser

log = logging.getLogger("pai_jupyter.cluster")
CONFIG_FILE = "hub.yaml"
TIMEOUT_S = 10.0
CACHE_MAX = 10_000
PAGE = 200  # users per request of the Hub's list (its largest page)
Accounts = Literal["own", "dedicated"]


class HubUnavailableError(ApiError):
    """The Hub did not answer (or answered with a server error) while a token of its was checked."""

    status, code = 503, "ServiceUnavailableError"


@dataclass(frozen=True)
class HubConfig:
    api_url: str
    token_file: Path
    service: str = "pai"
    accounts: Accounts = "dedicated"
    reconcile_seconds: float = 300.0
    cache_seconds: float = 30.0

    @property
    def access_scopes(self) -> frozenset[str]:
        """Either grants a Hub token the use of this service (JupyterHub's own rule for a service's access)."""
        return frozenset({f"access:services!service={self.service}", "access:services"})

    @classmethod
    def parse(cls, data: Any, where: str) -> HubConfig:
        """The config from hub.yaml's mapping; ValueError naming ``where`` and the key when one is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"{where}: must be a mapping of apiUrl, tokenFile, service, accounts, ...")
        api_url, token_file = data.get("apiUrl"), data.get("tokenFile")
        if not isinstance(api_url, str) or not api_url.startswith(("http://", "https://")):
            raise ValueError(f"{where}: apiUrl must be the Hub's API URL (http://host:port/hub/api)")
        if not isinstance(token_file, str) or not token_file:
            raise ValueError(f"{where}: tokenFile must name the file holding the service's API token")
        service, accounts = data.get("service", "pai"), data.get("accounts", "dedicated")
        if not isinstance(service, str) or not service:
            raise ValueError(f"{where}: service must be the name of the service on the Hub")
        if accounts not in ("own", "dedicated"):
            raise ValueError(f"{where}: accounts must be 'own' (PAM: the OS account of the name) or 'dedicated'")
        seconds = {k: data.get(k, d) for k, d in (("reconcileSeconds", 300.0), ("cacheSeconds", 30.0))}
        for key, value in seconds.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
                raise ValueError(f"{where}: {key} must be a number of seconds above 0 (at most a day)")
        return cls(
            api_url.rstrip("/"),
            Path(token_file),
            service,
            accounts,
            float(seconds["reconcileSeconds"]),
            float(seconds["cacheSeconds"]),
        )


def token_key(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


class HubLink:
    """The link: its config (re-read when hub.yaml changes), the Hub's API, the tokens it vouched for (by hash,
    for ``cache_seconds``), and the offboarding of users it no longer has."""

    def __init__(self, cluster: Cluster, local: Path) -> None:
        self.cluster = cluster
        self.path = local / CONFIG_FILE
        self._seen: tuple[float, int] | None = None  # (mtime, size) of the file last read
        self._config: HubConfig | None = None
        self._token = ""
        self.cache: OrderedDict[str, tuple[float, TokenUser]] = OrderedDict()
        self._last_reconcile = 0.0
        self._busy = False
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- the config ----------------------------------------------------------------------------------------------
    def config(self) -> HubConfig | None:
        """The current config, None when there is none (no Hub linked) or it is wrong (logged once)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._seen, self._config, self._token = None, None, ""
            return None
        if self._seen == (st.st_mtime, st.st_size):
            return self._config
        self._seen, self._config, self._token = (st.st_mtime, st.st_size), None, ""
        self.cache.clear()
        try:
            config = HubConfig.parse(yaml.safe_load(self.path.read_text()), str(self.path))
            token = config.token_file.read_text().strip()
        except (OSError, ValueError, yaml.YAMLError) as exc:
            log.error("no JupyterHub is linked: %s", exc)
            return None
        if not token:
            log.error("no JupyterHub is linked: %s is empty", config.token_file)
            return None
        self._config, self._token = config, token
        log.info("linked to the JupyterHub at %s (service %s)", config.api_url, config.service)
        return config

    def is_service_token(self, token: str) -> bool:
        return bool(self.config() and self._token and secrets.compare_digest(token, self._token))

    # ---- the Hub's API -------------------------------------------------------------------------------------------
    async def get(
        self, config: HubConfig, path: str, token: str | None = None, accept: str = "application/json"
    ) -> tuple[int, Any]:
        """GET ``path`` of the Hub's API with ``token`` (default: the service's); (status, JSON or None).
        HubUnavailableError when the Hub does not answer or fails (5xx): never taken as "no such user"."""
        request = HTTPRequest(
            config.api_url + path,
            headers={"Authorization": f"token {token or self._token}", "Accept": accept},
            connect_timeout=TIMEOUT_S,
            request_timeout=TIMEOUT_S,
            follow_redirects=False,
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as exc:
            raise HubUnavailableError(f"the JupyterHub at {config.api_url} does not answer ({exc})") from None
        if response.code >= 500 or response.code == 599:
            raise HubUnavailableError(f"the JupyterHub at {config.api_url} answered {response.code}")
        try:
            body = json.loads(response.body or b"null")
        except ValueError:
            body = None
        return response.code, body

    # ---- tokens the Hub vouched for ------------------------------------------------------------------------------
    def cached(self, token: str) -> TokenUser | None:
        key = token_key(token)
        found = self.cache.get(key)
        if found is None:
            return None
        if found[0] < time.monotonic():
            del self.cache[key]
            return None
        return found[1]

    def remember(self, token: str, user: TokenUser, config: HubConfig) -> None:
        self.cache[token_key(token)] = (time.monotonic() + config.cache_seconds, user)
        while len(self.cache) > CACHE_MAX:
            self.cache.popitem(last=False)

    def forget(self, name: str) -> None:
        """Drop every cached token of user ``name`` (offboarded: their next request asks the Hub again)."""
        for key in [k for k, (_, u) in self.cache.items() if u["name"] == name]:
            del self.cache[key]

    # ---- users the Hub no longer has -----------------------------------------------------------------------------
    async def has_user(self, config: HubConfig, name: str) -> bool:
        """Does the Hub have user ``name``? Only an explicit 404 is a no; anything unclear raises."""
        status, _ = await self.get(config, f"/users/{quote(name, safe='')}")
        if status == 404:
            return False
        if status == 200:
            return True
        raise HubUnavailableError(f"the JupyterHub answered {status} for user {name} (the service's scopes?)")

    async def hub_names(self, config: HubConfig) -> set[str]:
        """Every user name the Hub has (its paginated list)."""
        names: set[str] = set()
        offset = 0
        while True:
            path = f"/users?offset={offset}&limit={PAGE}"
            status, body = await self.get(config, path, accept="application/jupyterhub-pagination+json")
            if status != 200 or not isinstance(body, (list, dict)):
                raise HubUnavailableError(f"the JupyterHub answered {status} for its user list (list:users?)")
            items = body.get("items", []) if isinstance(body, dict) else body  # (a Hub before 2.0: a plain list)
            names |= {u["name"] for u in items if isinstance(u, dict) and isinstance(u.get("name"), str)}
            more = (body.get("_pagination") or {}).get("next") if isinstance(body, dict) else len(items) >= PAGE
            if not more or not items:
                return names
            offset += len(items)

    async def offboard(self, config: HubConfig, name: str) -> dict[str, Any] | None:
        """Offboard Hub-made user ``name`` once the Hub says 404 for them; None when it still has them."""
        if not self.cluster.store.is_hub_user(name) or await self.has_user(config, name):
            return None
        self.forget(name)
        done = await remove_user(self.cluster, name, "the JupyterHub (the user was deleted there)")
        log.info("offboarded %s, whom the JupyterHub no longer has: %s", name, done["message"])
        return done

    async def reconcile(self) -> list[str]:
        """Offboard every Hub-made user the Hub no longer has; the names offboarded."""
        config = self.config()
        if config is None:
            return []
        missing = self.cluster.store.hub_users() - await self.hub_names(config)
        return [name for name in sorted(missing) if await self.offboard(config, name)]

    def tick(self) -> None:
        """Called every second by the daemon: a reconcile every ``reconcileSeconds``, one at a time, in the
        background (a slow Hub never holds up the daemon's own tick)."""
        config = self.config()
        now = time.monotonic()
        if config is None or self._busy or now - self._last_reconcile < config.reconcile_seconds:
            return
        self._busy, self._last_reconcile = True, now
        task = asyncio.ensure_future(self._reconcile_once())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reconcile_once(self) -> None:
        try:
            await self.reconcile()
        except HubUnavailableError as exc:
            log.warning("the JupyterHub's users were not reconciled: %s", exc.message)
        except Exception:
            log.exception("the JupyterHub's users were not reconciled")
        finally:
            self._busy = False
