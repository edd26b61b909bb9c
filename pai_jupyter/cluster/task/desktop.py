"""The ``desktop`` runtime plugin (ours): a remote desktop in the browser.

In the task: a virtual display with a VNC server built in (TigerVNC's ``Xvnc``, listening on a unix socket only,
in a private directory, mode 0600, with a random per-task password), a small window manager and an xterm in the
task's working dir and environment on a coloured root window (``xsetroot``; Xvnc's own is black, which looked
like a desktop not drawn yet), and ``websockify`` bridging a websocket to that socket on the port allocated
to the task (``127.0.0.1`` only). websockify runs behind a guard (``WEBSOCKIFY_GUARD``) that wants the service's
token, as TensorBoard does: any local process can reach the port, and without the guard five wrong VNC passwords
from one of them would lock the owner out of the display ("Too many security failures"). websockify serves no
files: the page and noVNC's scripts come from the user's Jupyter server, which proxies the websocket behind
Jupyter's auth at ``{base_url}pai/jobs/{user}~{job}/{role}/{index}/desktop/`` and hands the password to the page
it writes there (never in a URL). Idle-culled like the other services: stopping it ends the display and
everything on it.

Parameters (all optional): ``taskRole`` / ``allTasks`` as for ``jupyter``; ``geometry`` (``WIDTHxHEIGHT``,
default 1280x800).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ..runtime import taskdir

NEEDED = ("Xvnc", "vncpasswd", "websockify")
BACKGROUND = "#3b6978"  # the root window's colour (xsetroot, where the task has it)
GEOMETRY_RE = re.compile(r"^[1-9][0-9]{2,3}x[1-9][0-9]{2,3}$")
NO_DESKTOP = (
    "the desktop plugin needs {what} in the task (Debian: apt-get install tigervnc-standalone-server "
    "tigervnc-tools websockify, and a window manager such as openbox, xterm and x11-xserver-utils)"
)
# websockify's own auth-plugin hook (``--auth-plugin``), with the plugin defined here: the token is read from the
# environment (never a command line, which ``ps`` shows to every local user) and must come in the header the
# proxy in the user's Jupyter server sends to every service, ``Authorization: token ...``; anything else is
# refused before the websocket is upgraded, so before a byte reaches the VNC server.
WEBSOCKIFY_GUARD = """
import hmac, os, sys
from websockify import auth_plugins, websocketproxy
token = ("token " + os.environ.pop("PAI_SERVICE_TOKEN_DESKTOP")).encode()
class Guard:
    def __init__(self, source=None):
        pass
    def authenticate(self, headers, target_host, target_port):
        if not hmac.compare_digest((headers.get("Authorization") or "").encode("utf-8", "replace"), token):
            raise auth_plugins.AuthenticationError(response_code=403, response_msg="Forbidden")
sys.argv[0] = "websockify"
sys.exit(websocketproxy.websockify_init())
"""


def command(info: dict[str, Any]) -> str:
    """The service (run in the background by the task's supervisor); its pid is the shell that owns the
    display, VNC, window manager, xterm and websockify, and takes them all down when stopped."""
    port = int(info["port"])
    password = str(info.get("token") or "")[:8]  # VNC passwords are 8 characters; the socket is 0600 besides
    if not re.fullmatch(r"[0-9a-f]{8}", password):
        raise ValueError("the desktop service needs its random token")
    geometry = str((info.get("parameters") or {}).get("geometry") or "1280x800")
    if not GEOMETRY_RE.match(geometry):
        geometry = "1280x800"
    missing = taskdir.in_shell(taskdir.service_file("desktop", "missing"))
    checks = "".join(
        f'command -v {b} >/dev/null || {{ pai_m=$(printf "{NO_DESKTOP}" "{b}"); echo "$pai_m" >&2; '
        f'echo "$pai_m" >{missing}; exit 127; }}; '
        for b in NEEDED
    )
    return "\n".join(
        [
            # the task's own files go under run/, the part of its task dir the task may write
            'pai_dt="$PAI_TASK_DIR/run/desktop"; (umask 077; mkdir -p "$pai_dt"); rm -f "$pai_dt/display"',
            checks.replace("{what}", "%s"),
            # the Python that runs websockify (its script's #! line, else python3) runs it behind the guard
            'pai_py=$(sed -n "1s/^#![[:space:]]*//p" "$(command -v websockify)")',
            'for pai_try in "$pai_py" python3; do $pai_try -c "import websockify.websocketproxy" 2>/dev/null && '
            "break; pai_try=; done",
            f'[ -n "$pai_try" ] || {{ pai_m=$(printf "{NO_DESKTOP}" "the websockify Python module"); '
            f'echo "$pai_m" >&2; echo "$pai_m" >{missing}; exit 127; }}',
            f'(umask 077; printf "%s\\n" {password} | vncpasswd -f >"$pai_dt/passwd")',
            # a unix socket's path must be short (108 bytes): a private dir in /tmp, removed when the desktop stops
            'pai_sd=$(mktemp -d "${TMPDIR:-/tmp}/pai-desktop.XXXXXX") || exit 1',
            # down: TERM, then KILL what is left a second later (websockify can swallow a TERM that lands while
            # it logs, and its port would keep the desktop "running")
            'pai_down() { kill $pai_pids 2>/dev/null; sleep 1; kill -9 $pai_pids 2>/dev/null; rm -rf "$pai_sd"; }',
            'pai_pids=""; trap "pai_down; exit 0" TERM INT HUP',
            f"Xvnc -displayfd 3 -geometry {shlex.quote(geometry)} -depth 24 -rfbport -1 "
            '-rfbunixpath "$pai_sd/vnc.sock" -rfbunixmode 0600 -SecurityTypes VncAuth -PasswordFile "$pai_dt/passwd" '
            "-nolisten tcp -AlwaysShared "
            '3>"$pai_dt/display" &',
            'pai_pids="$!"',
            'until [ -s "$pai_dt/display" ] && [ -S "$pai_sd/vnc.sock" ]; do kill -0 $pai_pids 2>/dev/null || exit 1; '
            "sleep 0.1; done",
            'export DISPLAY=":$(cat "$pai_dt/display")"',
            # Xvnc's root window is black: an empty desktop (the xterm not mapped yet, or closed) looked undrawn
            f"command -v xsetroot >/dev/null && xsetroot -solid {shlex.quote(BACKGROUND)}",
            "for pai_wm in openbox fluxbox icewm twm; do command -v $pai_wm >/dev/null && { $pai_wm & "
            'pai_pids="$pai_pids $!"; break; }; done',
            'command -v xterm >/dev/null && { xterm -geometry 100x30+40+40 & pai_pids="$pai_pids $!"; }',
            f"$pai_try -c {shlex.quote(WEBSOCKIFY_GUARD)} --auth-plugin __main__.Guard "
            f'--unix-target="$pai_sd/vnc.sock" {taskdir.SERVICE_HOST}:{port} &',
            'pai_pids="$pai_pids $!"',
            "wait $!",
            "pai_down",
        ]
    )
