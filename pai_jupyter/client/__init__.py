"""One client for any OpenPAI-compatible server: the embedded local cluster or a real OpenPAI."""

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
from .models import FINAL_STATES, JobDetail, JobList, JobSummary, TaskStatus
from .profiles import Profile, get_profile, load_profiles
from .sync import Client

__all__ = [
    "FINAL_STATES",
    "AsyncClient",
    "BadRequest",
    "Client",
    "InvalidJob",
    "JobConflict",
    "JobDetail",
    "JobList",
    "JobNotFound",
    "JobSummary",
    "NotSupported",
    "PaiError",
    "Profile",
    "RateLimited",
    "ServerUnavailable",
    "TaskStatus",
    "Unauthorized",
    "WaitTimeout",
    "get_profile",
    "load_profiles",
]
