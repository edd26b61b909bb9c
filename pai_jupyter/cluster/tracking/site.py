"""A site's own MLflow tracking server instead of the cluster's (``pai cluster start --mlflow-uri URL``).

Jobs become runs there as they do on the embedded server. With ``--mlflow-credentials FILE`` (JSON
``{"username": ..., "password": ...}`` of an admin account of the server's basic-auth app; the file must be the
daemon's own and readable by it alone) the daemon makes each platform user an account named ``pai-<user>`` (a
password derived from the cluster's key, as on the embedded server) and never touches the site's own accounts; who
else sees a user's experiment is then the server's ``default_permission``, which the site decides (docs/tracking.md).
Without credentials the server is taken to have no authentication: runs are made and logged with none, and
everyone who reaches the server sees them.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from urllib.parse import urlsplit

from .server import Admin

SITE_PREFIX = "pai-"  # the platform's accounts on a site's server


def site_url(uri: str) -> str:
    """``uri`` checked: an http(s) URL with a host, without a trailing slash; ValueError says what is wrong."""
    parts = urlsplit(uri.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--mlflow-uri {uri!r} is not an http(s) URL of an MLflow tracking server")
    return uri.strip().rstrip("/")


def site_admin(path: Path) -> Admin:
    """The admin account in ``path``; ValueError when the file is not the daemon's own, is readable by others or
    does not hold a username and a password."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as exc:
        raise ValueError(f"--mlflow-credentials {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise ValueError(f"--mlflow-credentials {path} must be a file of yours that no one else can read (chmod 600)")
    try:
        data = json.loads(path.read_text())
        return Admin(str(data["username"]), str(data["password"]))
    except (ValueError, KeyError, TypeError):
        raise ValueError(
            f'--mlflow-credentials {path} must hold {{"username": "...", "password": "..."}} (JSON)'
        ) from None
