"""Local routes into a running task: its services, metrics, and a terminal (a terminado websocket).

``/api/v2/local/jobs/{user}~{name}/services`` (GET), ``.../services/{role}/{index}/{name}`` (POST
``{"action": "start"|"stop"}``), ``.../metrics`` (GET), ``.../tasks/{role}/{index}/terminal`` (websocket:
``["stdin", text]`` in, ``["stdout", text]`` out, ``["set_size", rows, cols]``). Same bearer auth and
ownership rules as every other route.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from terminado.management import PtyWithClients, UniqueTermManager
from terminado.websocket import TermSocket

from ..core import taskops
from ..core.errors import ApiError, NotFoundError
from .base import HUB, MAX_INT, Base, Route, authenticate, visible_job

if TYPE_CHECKING:
    from ..core.service import Cluster


class Services(Base):
    def get(self, user: str, name: str) -> None:
        self.write_json(taskops.list_services(self.cluster, self.own_job(user, name)))


class ServiceAction(Base):
    def post(self, user: str, name: str, role: str, idx: str, service: str) -> None:
        row = self.own_job(user, name)
        if int(idx) > MAX_INT:
            raise NotFoundError(f"no task {role}[{idx}]")
        action = self.json_body().get("action")
        self.write_json(taskops.service_action(self.cluster, row, role, int(idx), service, str(action)), 202)


class Metrics(Base):
    async def get(self, user: str, name: str) -> None:
        self.write_json(await taskops.metrics(self.cluster, self.own_job(user, name)))


class TaskTermManager(UniqueTermManager):
    """One pty per websocket, running the command the task's runtime gives (docker exec, or a shell with the
    task's env and working dir)."""

    def open_terminal(self, argv: list[str], env: dict[str, str], cwd: str | None) -> PtyWithClients:
        term = PtyWithClients(argv, {**env, "TERM": "xterm-256color"}, cwd)
        self.start_reading(term)
        return term


class Terminal(TermSocket):
    def initialize(self, cluster: Cluster, term_manager: TaskTermManager) -> None:  # type: ignore[override]
        super().initialize(term_manager)
        self.task_terms = term_manager  # typed as ours: terminado's attribute is its base class
        self.cluster = cluster
        self.command: tuple[list[str], dict[str, str], str | None] | None = None

    def set_default_headers(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        message = "only GET with a websocket upgrade is allowed here" if status_code == 405 else self._reason
        code = "MethodNotAllowedError" if status_code == 405 else "UnknownError"
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps({"code": code, "message": message}))

    def check_origin(self, origin: str) -> bool:
        return True  # not a browser-facing route: bearer-token API clients (the Jupyter server extension)

    async def prepare(self) -> None:
        try:
            viewer = await authenticate(self.request, self.cluster, self.settings.get(HUB))
            user, name, role, idx = self.path_args
            if int(idx) > MAX_INT:
                raise NotFoundError(f"no task {role}[{idx}]")
            row = visible_job(self.cluster, viewer, user, name)
            self.command = taskops.terminal(self.cluster, row, role, int(idx))
        except ApiError as exc:
            self.set_status(exc.status)
            self.set_header("Content-Type", "application/json; charset=utf-8")
            self.finish(json.dumps(exc.body()))
        except RuntimeError as exc:  # e.g. no docker CLI on this host
            self.set_status(503)
            self.set_header("Content-Type", "application/json; charset=utf-8")
            self.finish(json.dumps({"code": "UnavailableError", "message": str(exc)}))

    def open(self, *args: Any, **kwargs: Any) -> None:
        assert self.command is not None
        self.term_name = "task"
        self.terminal = self.task_terms.open_terminal(*self.command)
        self.terminal.clients.append(self)
        self.send_json_message(["setup", {}])


def routes(job: str, args: dict[str, Any]) -> list[Route]:
    term_args = {**args, "term_manager": TaskTermManager(shell_command=["/bin/sh"])}
    return [
        (job + r"/services", Services, args),
        (job + r"/services/([^/]+)/(\d+)/([a-z]+)", ServiceAction, args),
        (job + r"/metrics", Metrics, args),
        (job + r"/tasks/([^/]+)/(\d+)/terminal", Terminal, term_args),
    ]
