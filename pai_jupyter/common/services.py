"""The one catalogue of the services a task can run for its user (OpenPAI runtime plugins): TensorBoard, Jupyter,
the remote desktop, SSH. What each layer knows of them is derived from here: the job rules (which plugins are
known), the daemon (which tasks run which service, a port named after it, how it starts), the Jupyter server's
proxy routes and titles, the notebook's actions, and — through the server's answers
(``services: [{name, title, url}]``) — the Lab's buttons and tabs.

A new service is one ``Service`` below plus its start command (``cluster/task/services.py`` ``START``): its
``switch`` puts it in both submit forms (the notebook's and the Lab's, protocol/formspec.py) and its ``icon`` on
their switch and on the Lab's buttons and tabs. tests/unit/test_services_catalogue.py adds a made-up one and finds
it in every layer; tests/unit/test_service_switch.py and labextension/test/serviceswitch.test.ts in both forms.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from typing_extensions import TypedDict  # pydantic reads it (a JSON Schema) on any Python

from .routes import task_route

# where a service runs unless its plugin says otherwise (common/routes.py service_tasks): not every task by
# default, a TensorBoard, Jupyter or desktop per task costs each task a port and memory, and the job page opens one
ONE_TASK = (
    "runs in the first task role's task 0; in Edit JSON, the plugin's parameters taskRole: NAME and allTasks: true "
    "choose another role and every task of it"
)


@dataclass(frozen=True)
class Param:
    """A plugin parameter the submit forms edit beside their service's switch (shown while it is on). ``key`` is
    the field's name in both forms."""

    key: str
    name: str  # the parameter's name in the plugin's ``parameters``
    label: str
    label_zh: str
    placeholder: str = ""


@dataclass(frozen=True)
class Switch:
    """How the submit forms turn a service on (its runtime plugin): the user guide's Chinese label, the help, and
    the parameters edited beside it."""

    label_zh: str
    help: str = ONE_TASK
    params: tuple[Param, ...] = ()


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
    switch: Switch | None = None  # its switch in the submit forms (None: no switch)
    # its icon: SVG shapes in a 24x24 box (the Lab draws them in its theme's colour); "": the Lab's own or none
    icon: str = ""

    @property
    def plugin(self) -> str:
        return self.name

    @property
    def port_label(self) -> str:
        return self.name


TENSORBOARD_ICON = (
    '<path d="M12 2 3 7.2v9.6L12 22l9-5.2V7.2L12 2zm0 2.3 6.9 4L12 12.3 5.1 8.3 12 4.3z'
    'M5 10l6 3.5v6.2L5 16.2V10zm8 9.7v-6.2l6-3.5v6.2l-6 3.5z"/>'
)
DESKTOP_ICON = (
    '<path d="M3 4h18a1 1 0 0 1 1 1v11a1 1 0 0 1-1 1h-7v2h3v2H7v-2h3v-2H3a1 1 0 0 1-1-1V5a1 1 0 0 1 1-1z'
    'm1 2v9h16V6H4z"/>'
)
LOGDIR = Param("tb_logdir", "logdir", "TensorBoard logdir", "TensorBoard 日志目录", "default: the job's log output")

# in the forms' order (the order of their switches)
CATALOGUE: tuple[Service, ...] = (
    Service(
        "tensorboard",
        "TensorBoard",
        web="http",
        starts="tools",
        switch=Switch("TensorBoard", params=(LOGDIR,)),
        icon=TENSORBOARD_ICON,
    ),
    Service(
        "jupyter", "Jupyter", web="http", starts="tools", page="lab", routed=True, switch=Switch("即时改码")
    ),  # (the Lab's own Jupyter icon)
    Service(
        "ssh",
        "SSH",
        web=None,
        starts="image",
        every_task=True,
        token=False,
        switch=Switch("网页 SSH", help="runs in every task of every task role"),
    ),
    Service("desktop", "Desktop", web="desktop", starts="image", switch=Switch("远程桌面"), icon=DESKTOP_ICON),
)


def by_name(name: str) -> Service | None:
    return next((s for s in CATALOGUE if s.name == name), None)


def names(web: Iterable[str | None] | None = None) -> tuple[str, ...]:
    """The services' names, in catalogue order; with ``web``, only those served that way (e.g. ``["http"]``)."""
    kinds = set(web) if web is not None else None
    return tuple(s.name for s in CATALOGUE if kinds is None or s.web in kinds)


def icons() -> dict[str, str]:
    """Each service's icon that has one (SVG shapes in a 24x24 box), by name: what the Lab draws its buttons and
    tabs with."""
    return {s.name: s.icon for s in CATALOGUE if s.icon}


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
    icon: str  # the catalogue's (``Service.icon``)


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
        out.append({"name": s.name, "title": s.title, "url": url, "icon": s.icon})
    return out
