"""One client for any OpenPAI-compatible server: the embedded local cluster or a real OpenPAI.

Names are imported on first use, so ``pai --help`` and ``import pai_jupyter.client.profiles`` stay fast."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .errors import (
        BadRequest,
        InvalidJob,
        JobConflict,
        JobNotFound,
        NotSupported,
        PaiError,
        RateLimited,
        ServerUnavailable,
        Unauthorized,
        WaitTimeout,
    )
    from .models import (
        FINAL_STATES,
        JobAttempt,
        JobDetail,
        JobEvent,
        JobList,
        JobMetrics,
        JobSummary,
        LeaseRenewal,
        MaxRunTimeChange,
        PriorityChange,
        Report,
        ServerInfo,
        ServiceAction,
        SweepRecord,
        TaskService,
        TaskStatus,
        Tracking,
        Usage,
        UsageFigures,
        WaitingQueue,
    )
    from .profiles import Profile, get_profile, load_profiles
    from .sync import Client

_WHERE = {
    "AsyncClient": "aio",
    "Client": "sync",
    "BadRequest": "errors",
    "InvalidJob": "errors",
    "JobConflict": "errors",
    "JobNotFound": "errors",
    "NotSupported": "errors",
    "PaiError": "errors",
    "RateLimited": "errors",
    "ServerUnavailable": "errors",
    "Unauthorized": "errors",
    "WaitTimeout": "errors",
    "FINAL_STATES": "models",
    "JobDetail": "models",
    "JobList": "models",
    "JobSummary": "models",
    "TaskStatus": "models",
    "Usage": "models",
    "UsageFigures": "models",
    "JobAttempt": "models",
    "JobEvent": "models",
    "JobMetrics": "models",
    "LeaseRenewal": "models",
    "MaxRunTimeChange": "models",
    "PriorityChange": "models",
    "Report": "models",
    "ServerInfo": "models",
    "ServiceAction": "models",
    "SweepRecord": "models",
    "TaskService": "models",
    "Tracking": "models",
    "WaitingQueue": "models",
    "Profile": "profiles",
    "get_profile": "profiles",
    "load_profiles": "profiles",
}

__all__ = [
    "FINAL_STATES",
    "AsyncClient",
    "BadRequest",
    "Client",
    "InvalidJob",
    "JobAttempt",
    "JobConflict",
    "JobDetail",
    "JobEvent",
    "JobList",
    "JobMetrics",
    "JobNotFound",
    "JobSummary",
    "LeaseRenewal",
    "MaxRunTimeChange",
    "NotSupported",
    "PaiError",
    "PriorityChange",
    "Profile",
    "RateLimited",
    "Report",
    "ServerInfo",
    "ServerUnavailable",
    "ServiceAction",
    "SweepRecord",
    "TaskService",
    "TaskStatus",
    "Tracking",
    "Unauthorized",
    "Usage",
    "UsageFigures",
    "WaitTimeout",
    "WaitingQueue",
    "get_profile",
    "load_profiles",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'pai_jupyter.client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
