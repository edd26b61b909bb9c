"""The one catalogue of the services a task can run for its user (OpenPAI runtime plugins): TensorBoard, Jupyter,
the remote desktop, SSH. What each layer knows of them is derived from here: the job rules (which plugins are
known), the daemon (which tasks run which service, a port named after it, how it starts), the Jupyter server's
proxy routes and titles, the notebook's actions, and — through the server's answers
(``services: [{name, title, url}]``) — the Lab's buttons and tabs.

A new service is one ``Service`` below plus its start command (``cluster/task/services.py`` ``START``);
tests/unit/test_services_catalogue.py adds a made-up one and finds it in every layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from typing_extensions import TypedDict  # pydantic reads it (a JSON Schema) on any Python

from .routes import task_route


@dataclass(frozen=True)
class Service:
    """One in-task service. Its ``name`` is also its runtime plugin's name, its port label (each task gets a port
    of its own under that label, so clones never fight over a fixed one) and its route segment under the task's
    route on the Jupyter server."""

    name: str
    title: str  # what buttons, tabs and messages call it
    # how the Jupyter server serves it: "http" through the generic proxy (HTTP and websockets, server/proxy.py),
    # "desktop" through its own page and websocket bridge (server/desktop.py), None: not a web page (ssh)
    web: Literal["http", "desktop"] | None
    # how it starts in the task: "tools" on the platform's Python environment (PAI_SERVICE_BIN, so the image
    # needs nothing), "image" from the task's own image (sshd, Xvnc + websockify)
    starts: Literal["tools", "image"]
    page: str = ""  # where its web page opens under its route ("lab": Jupyter's, not the bare server's)
    every_task: bool = False  # on every task of the job (ssh), else on the tasks its plugin names
    token: bool = True  # the proxy holds a token for it (ssh takes keys)
    routed: bool = False  # it serves under its route as base path (Jupyter), else at "/"

    @property
    def plugin(self) -> str:
        return self.name

    @property
    def port_label(self) -> str:
        return self.name


CATALOGUE: tuple[Service, ...] = (
    Service("ssh", "SSH", web=None, starts="image", every_task=True, token=False),
    Service("tensorboard", "TensorBoard", web="http", starts="tools"),
    Service("jupyter", "Jupyter", web="http", starts="tools", page="lab", routed=True),
    Service("desktop", "Desktop", web="desktop", starts="image"),
)


def by_name(name: str) -> Service | None:
    return next((s for s in CATALOGUE if s.name == name), None)


def names(web: Iterable[str | None] | None = None) -> tuple[str, ...]:
    """The services' names, in catalogue order; with ``web``, only those served that way (e.g. ``["http"]``)."""
    kinds = set(web) if web is not None else None
    return tuple(s.name for s in CATALOGUE if kinds is None or s.web in kinds)


def titles() -> dict[str, str]:
    return {s.name: s.title for s in CATALOGUE}


def route_re(web: str) -> str:
    """The regex alternative of the services served one way, for a route's ``(?P<service>...)`` group."""
    return "|".join(names([web]))


class Link(TypedDict):
    """A task's service as the browser opens it: ``url`` is a path on the Jupyter server, None without a page."""

    name: str
    title: str
    url: str | None


def links(base: str, user: str, job: str, role: str, index: int, present: Iterable[str]) -> list[Link]:
    """The ``{name, title, url}`` of each service a task has, as the Jupyter server answers the browser: ``url``
    is the page to open (a path on that server), None for a service without one (ssh). Unknown names are left
    out: a daemon newer than this server may run services it cannot serve."""
    out: list[Link] = []
    for name in present:
        s = by_name(name)
        if s is None:
            continue
        url = f"{task_route(base, user, job, role, index)}{s.name}/{s.page}" if s.web else None
        out.append({"name": s.name, "title": s.title, "url": url})
    return out
