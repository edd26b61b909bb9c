"""The extension's settings, as traitlets: ``c.PaiJupyter.idle_timeout_minutes = 30`` in a Jupyter config file
or ``--PaiJupyter.idle_timeout_minutes=30`` on the command line."""

from __future__ import annotations

from traitlets import Bool, Float, Integer, Unicode
from traitlets.config import Configurable


class PaiJupyter(Configurable):
    """Proxy to the services inside a job's tasks (Jupyter, TensorBoard, terminal) and live metrics."""

    profile = Unicode(
        None,
        allow_none=True,
        config=True,
        help="The pai_jupyter cluster profile (clusters.yaml) whose jobs this server shows and proxies. Unset: "
        "$PAI_PROFILE, else the default profile (``local``, the embedded cluster). Only jobs of this "
        "profile's user are reachable; the profile's token stays on the server, the browser never sees it.",
    )
    idle_timeout_minutes = Float(
        60.0,
        config=True,
        help="Stop a task's Jupyter or TensorBoard when no request reached it through this server for this "
        "many minutes, and close terminals idle that long; the next request starts the service again. "
        "0 turns idle culling off.",
    )
    service_start_timeout = Float(
        30.0,
        config=True,
        help="How long (seconds) a request waits for a task's service that is starting (or being restarted "
        "after culling) before answering 503 with a Retry-After header.",
    )
    resolve_cache_seconds = Float(
        1.0,
        config=True,
        help="How long (seconds) a task service's host and port, once looked up in the job's detail, are "
        "reused without asking the cluster again. Short, so that a port freed by a finished job is "
        "not proxied to for long; 0 asks on every request.",
    )
    metrics_min_interval = Float(
        0.5,
        config=True,
        help="The fastest rate (seconds between snapshots) a metrics websocket client may ask for; faster "
        "requests are raised to this.",
    )
    metrics_default_interval = Float(
        2.0, config=True, help='Seconds between metrics snapshots until the websocket client sends {"rate": seconds}.'
    )
    metrics_max_sockets = Integer(
        32,
        config=True,
        help="At most this many metrics websockets open at once on this server (each polls the cluster); "
        "more are refused with 429.",
    )
    jobs_list_limit = Integer(
        200,
        config=True,
        help="At most this many jobs (newest first) in GET pai/api/jobs; a client may ask for fewer with ?limit=.",
    )
    novnc_dir = Unicode(
        "",
        config=True,
        help="The installed noVNC (the directory with core/rfb.js) whose scripts the desktop page loads from "
        "this server (never from the task). Empty: the first of /usr/share/novnc (Debian's novnc package), "
        "/usr/share/webapps/novnc, /opt/novnc.",
    )
    enable_inside_tasks = Bool(
        False,
        config=True,
        help="Load the extension also in a Jupyter server that runs inside a job's task (PAI_JOB_NAME and "
        "PAI_CURRENT_TASK_ROLE_NAME set), such as the one the jupyter runtime plugin starts. Off: a task's "
        "Jupyter needs no job proxy, and its default profile would not be the user's.",
    )
