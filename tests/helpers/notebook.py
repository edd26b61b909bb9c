"""Notebooks in the tests: a cell's text as the tests check it, a notebook of parameters that waits for a gate file,
and Jupyter servers whose daemons' tasks run papermill (with their ``Env``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import JupyterServer, write_notebook
from tests.helpers.servers import Servers, servers


def cell_text(cell: Any) -> str:
    """Everything a cell showed, as text: streams and the text/plain of displays and results. A stream's outputs
    in a row are one text, as Jupyter shows them (a kernel flushing mid-line under load splits a print in two)."""
    out: list[str] = []
    last_stream = None
    for o in cell.get("outputs", []):
        stream = o.get("name") if o["output_type"] == "stream" else None
        if stream is not None and stream == last_stream:
            out[-1] += o["text"]
        elif stream is not None:
            out.append(o["text"])
        elif "data" in o:
            out.append(o["data"].get("text/plain", ""))
        elif o["output_type"] == "error":
            out.append(f"ERROR {o['ename']}: {o['evalue']}")
        last_stream = stream
    return "\n".join(out)


TASK_TOOLS = os.environ.get("PAI_TEST_TASK_TOOLS", "/opt/pai-task-tools")  # .ci/run: tensorboard, papermill


@dataclass
class Env:
    api: Api
    bob: Api
    jupyter: JupyterServer
    root: Path  # the Jupyter server's folder
    gates: Path  # a folder every account can use


def gated_notebook(path: Path) -> None:
    """A parameters cell, a cell that prints them with their types, and one that waits for a gate file."""
    params = nbformat.v4.new_code_cell("lr = 0.01\nepochs = 1\ngate = ''")
    params.metadata["tags"] = ["parameters"]
    write_notebook(
        path,
        params,
        "print('lr', lr, 'epochs', epochs, type(epochs).__name__)",
        "import os, time\nwhile gate and not os.path.exists(gate):\n    time.sleep(0.05)\nprint('through the gate')",
    )


@contextlib.contextmanager
def papermill_servers(tmp: Path) -> Iterator[tuple[Servers, Path]]:
    """``servers(tmp)`` whose daemons' tasks find papermill in the task tools (skips where it is not there), and
    a gates folder in ``tmp`` that every account can use."""
    if not Path(TASK_TOOLS, "bin", "papermill").exists():
        pytest.skip(f"no papermill in the task tools at {TASK_TOOLS} (.ci/run installs it there)")
    gates = tmp / "gates"
    gates.mkdir(mode=0o777)
    gates.chmod(0o777)
    with pytest.MonkeyPatch.context() as mp, servers(tmp) as s:
        mp.setenv("PAI_JUPYTER_TASK_TOOLS", TASK_TOOLS)  # the daemon's environment: its tasks find papermill there
        yield s, gates
