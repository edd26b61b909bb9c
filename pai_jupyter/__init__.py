"""pai_jupyter: a Jupyter-native workbench for OpenPAI-style training jobs.

Public names are imported lazily so that ``import pai_jupyter`` (and ``%load_ext pai_jupyter``) stays fast.
"""

from __future__ import annotations

from typing import Any

from .common.version import __version__

_LAZY = {
    "Job": "pai_jupyter.protocol",
    "TaskRole": "pai_jupyter.protocol",
    "Port": "pai_jupyter.protocol",
    "JobValidationError": "pai_jupyter.protocol",
    "Client": "pai_jupyter.client",
    "AsyncClient": "pai_jupyter.client",
    "Estimator": "pai_jupyter.sdk",
    "Sweep": "pai_jupyter.sweep",
    "report": "pai_jupyter.sweep.reporting",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pai_jupyter' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext pai_jupyter``: register the magics. The magics module imports the client only when used."""
    from .notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .notebook.magics import unload_ipython_extension as unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension lies (for ``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "pai-jupyter"}]
