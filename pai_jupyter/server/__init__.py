"""Jupyter server extension: a task's Jupyter, TensorBoard and terminal behind this server's auth, the
profile's jobs with their service URLs, and a metrics websocket.

Enabled on install by ``jupyter-config/jupyter_server_config.d/pai_jupyter.json``
(``jpserver_extensions: {"pai_jupyter.server": true}``); configured with ``c.PaiJupyter.*`` (see
``config.PaiJupyter`` or ``docs/server-extension.md``).
"""

from __future__ import annotations

import os
from typing import Any

from .config import PaiJupyter

__all__ = ["PaiJupyter", "routes"]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "pai_jupyter.server"}]


def routes(base_url: str, registry: Any) -> list[tuple[str, type, dict[str, Any]]]:
    """The extension's tornado routes under ``{base_url}pai/``."""
    from jupyter_server.utils import url_path_join

    from .common import JOB_RE
    from .desktop import DESKTOP_RE, NOVNC_RE, DesktopProxyHandler, NoNoVncHandler, NoVncHandler, novnc_dir
    from .jobs import JobsHandler
    from .lab_api import route_specs as lab_api_routes
    from .lab_capacity import route_specs as lab_capacity_routes
    from .lab_form import route_specs as lab_form_routes
    from .lab_profiles import route_specs as lab_profiles_routes
    from .lab_queue import route_specs as lab_queue_routes
    from .lab_ssh import route_specs as lab_ssh_routes
    from .lab_sweeps import route_specs as lab_sweeps_routes
    from .lab_tools import route_specs as lab_tools_routes
    from .metrics import MetricsSocket
    from .mlflow_proxy import route_specs as mlflow_routes
    from .notebookjobs import route_specs as notebook_job_routes
    from .proxy import SERVICE_RE, PaiNotFound, ServiceProxyHandler
    from .sandboxed import SANDBOXED_RE, SandboxedProxyHandler
    from .terminal import TERMINAL_RE
    from .terminal_page import route_specs as terminal_page_routes
    from .webssh import TaskTerminalHandler

    args = {"registry": registry}
    pai = url_path_join(base_url, "pai")
    novnc = novnc_dir(registry.config.novnc_dir if registry is not None else "")
    novnc_route = (
        (pai + NOVNC_RE, NoVncHandler, {"path": str(novnc)}) if novnc else (pai + NOVNC_RE, NoNoVncHandler, {})
    )
    return [
        (pai + "/api/jobs", JobsHandler, args),
        (pai + "/api/jobs/" + JOB_RE + "/metrics", MetricsSocket, args),
        *notebook_job_routes(pai, args),
        *lab_ssh_routes(pai, args),  # before lab_api's: theirs are longer paths under jobs/{job}
        *lab_capacity_routes(pai, args),
        *lab_api_routes(pai, args),
        *lab_form_routes(pai, args),
        *lab_tools_routes(pai, args),
        *lab_profiles_routes(pai, args),
        *lab_queue_routes(pai, args),
        *lab_sweeps_routes(pai, args),
        *mlflow_routes(pai, args),
        (pai + "/jobs/" + TERMINAL_RE, TaskTerminalHandler, args),  # web SSH on a remote OpenPAI
        *terminal_page_routes(pai, args),
        novnc_route,
        (pai + "/jobs/" + DESKTOP_RE, DesktopProxyHandler, {**args, "novnc": novnc}),
        (pai + "/jobs/" + SANDBOXED_RE, SandboxedProxyHandler, args),
        (pai + "/jobs/" + SERVICE_RE, ServiceProxyHandler, args),
        (pai + "(?:/.*)?", PaiNotFound, {}),
    ]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Build the one client for the configured profile, register the routes, start idle culling."""
    from tornado.ioloop import IOLoop

    from ..client import AsyncClient, PaiError
    from .pending import use_pending_kernels
    from .registry import Registry

    config = PaiJupyter(parent=serverapp)
    if (
        os.environ.get("PAI_JOB_NAME")
        and os.environ.get("PAI_CURRENT_TASK_ROLE_NAME")
        and not config.enable_inside_tasks
    ):
        serverapp.log.info(
            "pai_jupyter: inside a job's task; the server extension stays off "
            "(PaiJupyter.enable_inside_tasks=True turns it on)"
        )
        return
    use_pending_kernels(serverapp)  # a cell run while a PAI kernel's job starts is queued (server/pending.py)
    try:
        client = AsyncClient(config.profile)
    except PaiError as exc:
        serverapp.log.error("pai_jupyter: the server extension is off: %s", exc)
        return
    registry = Registry(client, config, serverapp.log)
    serverapp.web_app.settings["pai_jupyter_registry"] = registry
    # tells the JupyterLab extension that the routes are here (it stays idle where they are not, e.g. in tasks)
    serverapp.web_app.settings.setdefault("page_config_data", {})["paiJupyterApi"] = "1"
    serverapp.web_app.add_handlers(".*$", routes(serverapp.web_app.settings["base_url"], registry))
    IOLoop.current().add_callback(registry.start_culling)
    serverapp.log.info(
        "pai_jupyter: jobs of profile %r (user %r) under %spai/ (idle culling: %s)",
        client.profile.name,
        client.username,
        serverapp.web_app.settings["base_url"],
        f"{config.idle_timeout_minutes:g} min" if config.idle_timeout_minutes > 0 else "off",
    )
