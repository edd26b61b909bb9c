"""Notebook surfaces: magics (``%load_ext pai_jupyter``), widgets (JobForm, JobList, LogViewer, ResourceMonitor),
embedded TensorBoard and training curves. Names are imported lazily: widgets and bqplot load only when used."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "JobForm": "form",
    "JobList": "joblist",
    "LogViewer": "logviewer",
    "ResourceMonitor": "monitor",
    "PaiMagics": "magics",
}

__all__ = [*_LAZY, "curves", "tensorboard"]


def __getattr__(name: str) -> Any:
    if name in ("curves", "tensorboard", "display"):
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
