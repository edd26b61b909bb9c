"""How a task sees the job's files: what each runtime supplies (``Runtime.view``) so the task's spec is made once,
with no branch on the kind of runtime (``task/taskspec.py`` asks the view, never the runtime's kind).

A task on this host or on a node of a shared file system (the process and Slurm runtimes) sees the job's files at
their host paths; a task in a container sees each of them at a fixed path inside, through a bind mount. A new
runtime whose tasks see the files some other way (a Kubernetes pod's volumes) supplies its own view.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path

from ...protocol import containerpaths


@dataclass
class Mount:
    """A host path a container task sees at ``container_path``."""

    host_path: str
    container_path: str
    read_only: bool = False


class TaskView(abc.ABC):
    """The paths a task is told (its environment, its ssh key, its working directory) and the mounts that make
    them true; and whether it sees the job's image or the machine's own system."""

    @abc.abstractmethod
    def unused_images(self, runtime: str, images: list[str]) -> str:
        """What a job naming ``images`` is told in its events when its tasks do not run in them: a mistyped
        image was accepted silently, its notice only in each task's ``runtime`` log. "": they do (or none)."""

    @abc.abstractmethod
    def path(self, host: Path | str, inside: str) -> str:
        """What the task calls the host path ``host``, which a container sees at ``inside`` (see ``share``)."""

    @abc.abstractmethod
    def share(self, host: Path | str, inside: str, read_only: bool = False) -> list[Mount]:
        """What makes ``path(host, inside)`` true in the task: the mounts it needs (none where it sees the host)."""

    def share_same(self, host: Path | str, read_only: bool) -> list[Mount]:
        """An admin's existing host directory the task sees at the same path (data, output, code)."""
        return self.share(host, str(host), read_only)

    @abc.abstractmethod
    def script(self, script: str) -> str:
        """The job's commands as the task runs them (a host task's ``/userhome`` reaches the user's home)."""

    @abc.abstractmethod
    def work_dir(self, host: Path | str | None, inside: str | None) -> str | None:
        """The task's working directory: ``host`` on this host, ``inside`` in a container (None there: the
        image's own)."""


class HostView(TaskView):
    """Tasks run on this host (or a node sharing its file system), at host paths, as the job's account."""

    def unused_images(self, runtime: str, images: list[str]) -> str:
        if not images:
            return ""
        return (
            f"the image {', '.join(images)} is recorded but not used: the {runtime} runtime runs the commands on "
            "the machine's own system (its python3, its packages), not in a container; each task's runtime log says "
            "so too (pai logs JOB --stream runtime)"
        )

    def path(self, host: Path | str, inside: str) -> str:
        return str(host)

    def share(self, host: Path | str, inside: str, read_only: bool = False) -> list[Mount]:
        return []

    def script(self, script: str) -> str:
        # /userhome: the same directory through $PAI_USER_HOME (protocol/containerpaths.py)
        rewritten, changed = containerpaths.rewrite(script)
        return f"{containerpaths.rewrite_notice()}\n{rewritten}" if changed else script

    def work_dir(self, host: Path | str | None, inside: str | None) -> str | None:
        return None if host is None else str(host)


class ContainerView(TaskView):
    """Tasks run in containers: each job file is bind-mounted at its fixed path inside (``/userhome``, the task
    directory at ``taskdir.IN_CONTAINER``, the job's logs and checkpoints under ``/pai``, ``/ml``)."""

    def unused_images(self, runtime: str, images: list[str]) -> str:
        return ""  # each task runs in its image

    def path(self, host: Path | str, inside: str) -> str:
        return inside

    def share(self, host: Path | str, inside: str, read_only: bool = False) -> list[Mount]:
        return [Mount(str(host), inside, read_only)]

    def script(self, script: str) -> str:
        return script

    def work_dir(self, host: Path | str | None, inside: str | None) -> str | None:
        return inside


HOST = HostView()
CONTAINER = ContainerView()
