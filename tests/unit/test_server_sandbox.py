"""The capability a sandboxed task page carries (server/sandbox.py): bound to one task service, expiring, and
the shim placed before the page's own scripts."""

from __future__ import annotations

import re

from pai_jupyter.server import sandbox
from pai_jupyter.server.sandboxed import SANDBOXED_RE

ROUTE = "alice~train@1700000000000/main/0/tensorboard"


def test_a_capability_opens_its_own_service_only_and_expires() -> None:
    cap = sandbox.issue(ROUTE, now=1_000_000)
    assert re.fullmatch(sandbox.CAP_RE, "~" + cap)
    assert sandbox.valid(ROUTE, cap, now=1_000_000 + 60)
    assert not sandbox.valid(ROUTE, cap, now=1_000_000 + sandbox.LIFETIME + 1)  # expired
    assert not sandbox.valid("alice~train@1700000000000/main/1/tensorboard", cap, now=1_000_060)  # another task
    assert not sandbox.valid("alice~train@1700000000000/main/0/jupyter", cap, now=1_000_060)  # another service
    assert not sandbox.valid("alice~train@1700000099000/main/0/tensorboard", cap, now=1_000_060)  # re-created
    issued, sig = cap.split(".")
    later = format(int(issued, 16) + 3600, "x")
    assert not sandbox.valid(ROUTE, f"{later}.{sig}", now=1_000_060)  # its time cannot be moved on
    assert not sandbox.valid(ROUTE, f"{issued}.{'0' * 32}", now=1_000_060)
    assert not sandbox.valid(ROUTE, "not-a-capability", now=1_000_060)


def test_the_route_a_capability_is_bound_to_comes_from_the_path() -> None:
    m = re.fullmatch(SANDBOXED_RE, f"alice~train/main/0/tensorboard/~{sandbox.issue(ROUTE)}/data/runs")
    assert m is not None and sandbox.route(m.groupdict(), "1700000000000") == ROUTE and m.group("rest") == "/data/runs"
    assert re.fullmatch(SANDBOXED_RE, "alice~train/main/0/desktop/~1.%s/" % ("0" * 32)) is None  # ours: no sandbox


def test_the_shim_comes_before_the_pages_own_scripts() -> None:
    page = b'<!doctype html><html><head lang="en"><script src="index.js"></script></head></html>'
    out = sandbox.inject_shim(page, "/x/~c/~pai-sandbox.js")
    assert out.index(b"~pai-sandbox.js") < out.index(b"index.js") and out.startswith(b"<!doctype html><html><head")
    assert sandbox.SANDBOX_CSP.startswith("sandbox ") and "allow-same-origin" not in sandbox.SANDBOX_CSP
