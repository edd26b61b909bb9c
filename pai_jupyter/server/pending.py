"""Pending kernels, so that a cell run while a "Python on PAI" kernel starts is queued, not dropped.

Without them Jupyter answers Lab's session request only once the kernel is up: for a PAI kernel, once its job runs
and its heartbeat answers (seconds, or as long as the job waits for resources). Meanwhile the notebook's session
has no kernel, and JupyterLab drops a cell run then (no ``[*]``, no output). With pending kernels the session has
its kernel at once; Lab queues what it sends until the kernel's websocket opens, which Jupyter holds until the
kernel is ready, and a kernel that fails to start is shown dead with its reason (the provisioner's message).
"""

from __future__ import annotations

from typing import Any

SECTIONS = ("MultiKernelManager", "MappingKernelManager", "AsyncMultiKernelManager", "AsyncMappingKernelManager")


def use_pending_kernels(serverapp: Any) -> bool:
    """Turn ``use_pending_kernels`` on for this server unless its config sets it; True when it is on."""
    km = getattr(serverapp, "kernel_manager", None)
    if km is None or not hasattr(km, "use_pending_kernels"):
        return False
    configured = any("use_pending_kernels" in serverapp.config.get(section, {}) for section in SECTIONS)
    if not configured:
        km.use_pending_kernels = True
    return bool(km.use_pending_kernels)
