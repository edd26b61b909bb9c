"""``DELETE /api/v2/local/hub/users/{name}``: the linked JupyterHub (its PAISpawner's ``delete_forever``) says it is
deleting user ``name``. Only the Hub's service token may say so, and it decides nothing: the daemon offboards the
user (core/offboard.py) once the Hub itself answers that it no longer has them (core/hub.py), so a leaked service
token removes no one who still exists. 202 while that is checked; 404 when no Hub is linked or ``name`` is no user
the Hub made."""

from __future__ import annotations

from typing import Any

from ..core.errors import NoApiError, NoUserError, UnauthorizedUserError
from .base import Base, Route, request_token


class HubUser(Base):
    public = True  # the Hub's service token, checked below: it is no platform user's

    def delete(self, name: str) -> None:
        hub = self.hub
        if hub is None or hub.config() is None:
            raise NoApiError("no JupyterHub is linked to this cluster (local/hub.yaml)")
        token = request_token(self.request, self.cluster)
        if token is None or not hub.is_service_token(token):
            raise UnauthorizedUserError("only the linked JupyterHub's service token may announce a user's removal")
        if not self.cluster.store.is_hub_user(name):
            raise NoUserError(f"{name} is no user the JupyterHub made here: nothing to offboard")
        hub.announced(name)
        self.write_json({"name": name, "message": f"{name} is offboarded once the JupyterHub no longer has them"}, 202)


def routes(args: dict[str, Any]) -> list[Route]:
    return [(r"/api/v2/local/hub/users/([^/]+)", HubUser, args)]
