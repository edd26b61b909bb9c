"""Runtimes by name: what the daemon's ``--runtime NAME`` (and ``backend:`` in the cluster's config) picks.

Each entry is a factory ``make(options) -> Runtime`` in its own module, imported only when chosen (the Docker SDK
and Slurm's commands are needed only by their runtimes). Other packages add runtimes through the entry point
group ``pai_jupyter.runtimes`` (``name = "package.module:make"``): a new backend is one package, no daemon change.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol

from .base import DEFAULT_PIDS_LIMIT, Runtime
from .ports import Span

GROUP = "pai_jupyter.runtimes"
BUILTIN = {
    "process": f"{__name__}:make_process",
    "docker": f"{__name__}:make_docker",
    "slurm": "pai_jupyter.cluster.runtime.slurm:make",
}


@dataclass
class Options:
    """The daemon's runtime flags; each runtime uses those that mean something to it."""

    memory_enforcement: str = "auto"
    cpu_limits: bool = False
    warm_dir: Path | None = None
    pids_limit: int = DEFAULT_PIDS_LIMIT
    task_ports: Span | None = None  # cluster.yaml's taskPorts: the runtime's own default where None


class Factory(Protocol):
    def __call__(self, options: Options) -> Runtime: ...


def make_process(options: Options) -> Runtime:
    """Process groups under the C shim, keeping two warm shims in ``warm_dir`` (on the task directories' disk)."""
    from .process import ProcessRuntime

    return ProcessRuntime(
        memory_enforcement=options.memory_enforcement,
        cpu_limits=options.cpu_limits,
        warm_shims=2 if options.warm_dir else 0,
        warm_dir=options.warm_dir,
        pids_limit=options.pids_limit,
    )


def make_docker(options: Options) -> Runtime:
    from .docker import DockerRuntime, docker_available  # a slow import: only when Docker is asked for

    if not docker_available():
        raise SystemExit("pai cluster: --runtime docker was asked for but no Docker engine answers")
    return DockerRuntime(pids_limit=options.pids_limit)


def _targets() -> dict[str, str]:
    found = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep.value)  # a plug-in never replaces a built-in runtime
    return found


def names() -> list[str]:
    """Every runtime that can be asked for by name."""
    return sorted(_targets())


def factory(name: str) -> Factory:
    """The factory of runtime ``name``; ValueError names the known ones."""
    target = _targets().get(name)
    if target is None:
        raise ValueError(f"no runtime named {name!r} (known: {', '.join(names())})")
    module, _, attr = target.partition(":")
    made: Factory = getattr(importlib.import_module(module), attr)
    return made


def make(name: str, options: Options) -> Runtime:
    runtime = factory(name)(options)
    if options.task_ports is not None:  # the site's range, for a plug-in's runtime too
        runtime.task_ports = options.task_ports
    return runtime
