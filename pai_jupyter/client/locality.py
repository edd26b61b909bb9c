"""Is this the local server? Decided once, for the client, the kernel provisioner and the server extension.

It is two questions, and only the profile and the server's own ``/api/v2/info`` answer them:

- ``embedded``: the server is a pai_jupyter embedded cluster, so it serves the local-only routes
  (``/api/v2/local/...``: task services, metrics, terminals, the job's SSH key, the live log stream, a clone that
  keeps the secrets). The ``local`` profile always is one (it needs no request); any other profile is one when its
  info carries the ``local`` block, which OpenPAI's does not.
- ``this_machine``: the server is the ``local`` profile's own daemon, so its tasks run on this machine as this user
  (the same files and python, task ports reachable on loopback without a tunnel).

The URL's host decides neither: ``http://127.0.0.1:…`` (or ``[::1]``, ``localhost``) may be an SSH port forward to
a remote OpenPAI, or a daemon another user runs; such a profile is treated as remote, tunnel and all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .profiles import Profile


@dataclass(frozen=True)
class Locality:
    embedded: bool
    this_machine: bool


REMOTE = Locality(embedded=False, this_machine=False)


def serves_local_routes(info: object) -> bool:
    """Whether an ``/api/v2/info`` answer (``ServerInfo``, or its JSON) is an embedded cluster's: it adds the
    ``local`` block. (Read by attribute, not by importing the model: this module stays free of pydantic.)"""
    if isinstance(info, Mapping):
        return "local" in info
    return getattr(info, "local", None) is not None


def locality(profile: Profile, info: object = None) -> Locality:
    """Where ``profile``'s server is. ``info``: its ``/api/v2/info`` answer, or None when not asked (which makes
    any profile but ``local`` remote). The ``local`` profile needs no answer, but one that is not an embedded
    cluster's makes it neither (something else answers at its address)."""
    if profile.is_local:
        here = info is None or serves_local_routes(info)
        return Locality(embedded=here, this_machine=here)
    return Locality(embedded=serves_local_routes(info), this_machine=False)
