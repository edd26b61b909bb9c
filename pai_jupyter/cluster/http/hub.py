"""``DELETE /api/v2/local/hub/users/{name}``: the linked JupyterHub (its PAISpawner, once the Hub deleted the user)
says user ``name`` is gone. Only the Hub's service token may say so, and it decides nothing: the daemon asks the
Hub itself and offboards the user (core/offboard.py) only when the Hub answers 404 for them (core/hub.py), so a
leaked service token removes no one who still exists (409). 404 when no Hub is linked or ``name`` is no user the
Hub made."""

from __future__ import annotations

from typing import Any

from ..core.errors import ConflictJobError, NoApiError, NoUserError, UnauthorizedUserError
from .base import Base, Route, request_token


class HubUser(Base):
    public = True  # the Hub's service token, checked below: it is no platform user's

    async def delete(self, name: str) -> None:
        hub = self.hub
        config = hub.config() if hub is not None else None
        if hub is None or config is None:
            raise NoApiError("no JupyterHub is linked to this cluster (local/hub.yaml)")
        token = request_token(self.request, self.cluster)
        if token is None or not hub.is_service_token(token):
            raise UnauthorizedUserError("only the linked JupyterHub's service token may announce a user's removal")
        if not self.cluster.store.is_hub_user(name):
            raise NoUserError(f"{name} is no user the JupyterHub made here: nothing to offboard")
        done = await hub.offboard(config, name)
        if done is None:
            raise ConflictJobError(f"the JupyterHub still has user {name}: nothing was offboarded")
        self.write_json(done)


def routes(args: dict[str, Any]) -> list[Route]:
    return [(r"/api/v2/local/hub/users/([^/]+)", HubUser, args)]
