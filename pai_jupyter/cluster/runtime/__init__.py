"""Task runtimes of the embedded cluster: ``process`` (process groups under the C shim, or shim.sh) and ``docker``.

Import ``.process`` / ``.docker`` where needed: the Docker SDK is imported only by the docker runtime.
"""

from .base import (
    EXIT_IMAGE_NOT_FOUND,
    EXIT_LOST,
    EXIT_OOM,
    EXIT_START_FAILED,
    Runtime,
    TaskExit,
    TaskHandle,
    TaskSpec,
    TaskStartError,
)
from .view import Mount, TaskView

__all__ = [
    "EXIT_IMAGE_NOT_FOUND",
    "EXIT_LOST",
    "EXIT_OOM",
    "EXIT_START_FAILED",
    "Mount",
    "Runtime",
    "TaskExit",
    "TaskHandle",
    "TaskSpec",
    "TaskStartError",
    "TaskView",
]
