"""A module's servers, started and torn down in one place: daemons (conftest.start_daemon) and ``jupyter server``
subprocesses (jupyter_fixture.start_jupyter) in one temporary directory. Every module-scoped fixture that runs a
daemon beside a Jupyter server used to repeat the same try/finally; this is that try/finally."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pai_jupyter.cluster import control

from .conftest import Api, kill_leftovers, start_daemon
from .jupyter_fixture import JupyterServer, start_jupyter, write_notebook


class Servers:
    """What a fixture started under ``tmp``; the daemon home is ``tmp/home`` unless another is named."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.home = tmp, tmp / "home"
        self.homes: list[Path] = [self.home]  # stopped at the end even where a Jupyter server started the daemon
        self.jupyters: list[JupyterServer] = []

    def daemon(self, home: Path | None = None, **kwargs: Any) -> Api:
        """A daemon in ``home`` (default ``self.home``), with start_daemon's keyword arguments."""
        home = home or self.home
        if home not in self.homes:
            self.homes.append(home)
        return start_daemon(home, **kwargs)

    def jupyter(self, *args: Any, name: str = "jupyter", home: Path | None = None, **kwargs: Any) -> JupyterServer:
        """A Jupyter server in ``tmp/name`` for the daemon in ``home`` (start_jupyter's other arguments)."""
        server = start_jupyter(self.tmp / name, home or self.home, *args, **kwargs)
        self.jupyters.append(server)
        return server

    def close(self) -> None:
        """Stop the Jupyter servers, then each daemon, and kill whatever its tasks left behind."""
        for server in self.jupyters:
            server.stop()
        for home in self.homes:
            control.stop(home)
            kill_leftovers(home)


@contextlib.contextmanager
def servers(tmp: Path) -> Iterator[Servers]:
    """``Servers`` in ``tmp``, all stopped when the block ends (a fixture yields from inside the block)."""
    started = Servers(tmp)
    try:
        yield started
    finally:
        started.close()


@contextlib.contextmanager
def notebook_lab(tmp: Path, notebook: str, *cells: str, daemon: bool = True) -> Iterator[JupyterServer]:
    """The setup of a test that runs a notebook in a browser: a JupyterLab server (beside a daemon for the
    notebook's jobs, unless ``daemon`` is false) whose root holds ``notebook`` of these code cells."""
    with servers(tmp) as s:
        if daemon:
            s.daemon()
        server = s.jupyter(lab=True)
        write_notebook(tmp / "jupyter" / "root" / notebook, *cells)
        yield server
