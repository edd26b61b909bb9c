"""A JupyterHub token as a platform user (core/hub.py holds the link; docs/hub.md, docs/security.md).

A token the store does not know is shown to the linked Hub. It is taken only when the Hub names a *user* (never a
service) whose token holds the service's access scope (``access:services!service=<service>``, or
``access:services``): JupyterHub's rule for who may use a service, which ``pai hub`` grants every user and a
server's token inherits. A user seen for the first time becomes a platform user, made and marked as the Hub's
(offboarded when the Hub no longer has them); one whose name an admin already gave a user is that user. A request
made with a Hub token is admin exactly when the Hub says its owner is the Hub's admin. Never: the daemon's own
account on a root daemon (its tasks would run as root), or a name the platform cannot hold.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING

from ..core.errors import ConflictJobError, ForbiddenUserError
from ..core.hub import HubConfig, HubLink
from ..core.store import TokenUser
from ..core.store.users import USER_NAME

if TYPE_CHECKING:
    from ..core.service import Cluster


async def hub_user(hub: HubLink, cluster: Cluster, token: str) -> TokenUser | None:
    """The platform user of a Hub token; None when the Hub does not know the token (or no Hub is linked);
    ForbiddenUserError when it knows it but it may not act here (and why)."""
    config = hub.config()
    if config is None:
        return None
    known = hub.cached(token)
    if known is not None:
        return known
    status, model = await hub.get(config, "/user", token)
    if status in (401, 403, 404) or not isinstance(model, dict):
        return None
    if model.get("kind") != "user" or not isinstance(model.get("name"), str):
        raise ForbiddenUserError("a JupyterHub token acts here only for a Hub user (this one is a service's)")
    scopes = model.get("scopes")
    if not isinstance(scopes, list) or not config.access_scopes & set(scopes):
        raise ForbiddenUserError(
            f"this JupyterHub token does not hold access:services!service={config.service}: the Hub grants it to "
            "those who may use the workbench (a role with that scope; docs/hub.md)"
        )
    user = admit(cluster, config, model["name"], model.get("admin") is True)
    hub.remember(token, user, config)
    return user


def admit(cluster: Cluster, config: HubConfig, name: str, admin: bool) -> TokenUser:
    """The platform user for Hub user ``name``, made on first sight (with the OS account ``accounts: own``
    maps them to); a user the Hub made follows the Hub's admin flag."""
    accounts, store = cluster.accounts, cluster.store
    if not USER_NAME.fullmatch(name):
        raise ForbiddenUserError(
            f"the Hub user {name[:64]!r} cannot be a platform user: a name starts with a letter or digit, then "
            "letters, digits, '-', '_' and '.' (at most 64); map the Hub's names so (Authenticator.username_map)"
        )
    if name == accounts.owner and os.geteuid() == 0:
        raise ForbiddenUserError(f"{name} owns this cluster (the daemon runs as that account): never a Hub user")
    row = store.user(name)
    if row is None:
        cluster.admit_user(name)
        account = name if config.accounts == "own" and accounts.isolating else None
        accounts.vet(name, account)
        with store.tx():
            made = store.add_hub_user(name, admin=admin)
            if made and account is not None:
                try:
                    store.set_account(name, account)
                except sqlite3.IntegrityError:
                    raise ConflictJobError(
                        f"the OS account {account} runs the tasks of user {store.user_of_account(account)} already"
                    ) from None
    elif store.is_hub_user(name) and bool(row["admin"]) != admin:
        store.set_admin(name, admin)
    return {"name": name, "admin": int(admin)}
