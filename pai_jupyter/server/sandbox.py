"""Task-served pages in an opaque origin: what a task's Jupyter or TensorBoard serves cannot act as this server.

A task (or the image it runs) controls what its services answer. Served as it is on this server's origin, a page
from one could read this server's ``_xsrf`` cookie and open a terminal here, as the account that runs this server.
So every answer of a task service carries ``Content-Security-Policy: sandbox`` without ``allow-same-origin`` (as
Jupyter serves ``/files/``): the browser gives the page a unique opaque origin, with no access to this server's
cookies, storage or pages, and its requests back here are cross-origin, without cookies.

Without cookies its own requests need another credential: the page is served under a *capability*,
``…/{jupyter|tensorboard}/~<cap>/``, an HMAC (this server process's key) of the task service's route, the job's
submission time and the time it was issued, good for ``LIFETIME`` seconds and for that one service of that one job
only (a job deleted and submitted again under the same name is another job). A browser opening the service (a
navigation, signed in) is redirected there; the page's URLs keep the capability (TensorBoard's are relative, the
in-task Jupyter's base path is rewritten to include it), and the proxy accepts it instead of the login, answers
with ``Access-Control-Allow-Origin: *`` (no cookie is ever involved) and lets its websockets through. It reaches
the task's own service only, which the task controls anyway; it authenticates nothing else on this server. After
a restart of this server, or once expired, a reload gets a fresh one.

In an opaque origin ``localStorage``, ``document.cookie`` and ``new Worker(url)`` throw; TensorBoard and
JupyterLab use them, so their pages get ``SHIM`` first (served from here): storage kept in memory for the page's
lifetime, an empty cookie jar, and workers started from a ``blob:`` URL that imports the script.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from typing import Any

SANDBOX_CSP = "sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals; frame-ancestors 'self'"
LIFETIME = 24 * 3600.0
CAP_RE = r"~(?P<cap>[0-9a-f]{1,12}\.[0-9a-f]{32})"
SHIM_NAME = "~pai-sandbox.js"
_KEY = secrets.token_bytes(32)

SHIM = """// pai_jupyter: this page runs in an opaque origin (CSP sandbox), where these throw
(function () {
  function memory() {
    const m = new Map();
    return {
      getItem: (k) => (m.has(String(k)) ? m.get(String(k)) : null),
      setItem: (k, v) => { m.set(String(k), String(v)); },
      removeItem: (k) => { m.delete(String(k)); },
      clear: () => { m.clear(); },
      key: (i) => Array.from(m.keys())[i] ?? null,
      get length() { return m.size; },
    };
  }
  for (const name of ["localStorage", "sessionStorage"]) {
    try { window[name]; } catch (e) { Object.defineProperty(window, name, { value: memory(), configurable: true }); }
  }
  try { document.cookie; } catch (e) {
    Object.defineProperty(document, "cookie", { get: () => "", set: () => {}, configurable: true });
  }
  const Native = window.Worker;
  function Worker(url, options) {
    try { return new Native(url, options); } catch (e) {
      const abs = JSON.stringify(new URL(url, document.baseURI).href);
      const src = options && options.type === "module" ? "import " + abs + ";" : "importScripts(" + abs + ");";
      return new Native(URL.createObjectURL(new Blob([src], { type: "text/javascript" })), options);
    }
  }
  Worker.prototype = Native.prototype;
  window.Worker = Worker;
})();
"""


def route(kw: dict[str, Any], stamp: str) -> str:
    """What a capability is bound to, from a request's path arguments and the job's ``stamp`` (its submission
    time, ``Registry.stamp``): one service of one task of that job, not of another submitted under its name."""
    return f"{kw.get('user')}~{kw.get('name')}@{stamp}/{kw.get('role')}/{kw.get('index')}/{kw.get('service')}"


def _sign(route: str, issued: str) -> str:
    return hmac.new(_KEY, f"{route}\n{issued}".encode(), hashlib.sha256).hexdigest()[:32]


def issue(route: str, now: float | None = None) -> str:
    """A capability for ``route`` (``user~job@stamp/role/index/service``), valid from now for LIFETIME seconds."""
    issued = format(int(time.time() if now is None else now), "x")
    return f"{issued}.{_sign(route, issued)}"


def valid(route: str, cap: str, now: float | None = None) -> bool:
    """Was ``cap`` issued by this server for ``route``, and is it still good?"""
    m = re.fullmatch(r"([0-9a-f]{1,12})\.([0-9a-f]{32})", cap)
    if not m or not hmac.compare_digest(m.group(2), _sign(route, m.group(1))):
        return False
    age = (time.time() if now is None else now) - int(m.group(1), 16)
    return -60 <= age <= LIFETIME


def inject_shim(page: bytes, shim_url: str) -> bytes:
    """``page`` with a script tag for the shim as the first thing in its head (before the page's own scripts)."""
    tag = f'<script src="{shim_url}"></script>'.encode()
    head = re.search(rb"<head(\s[^>]*)?>", page, re.I)
    at = head.end() if head else 0
    return page[:at] + tag + page[at:]
