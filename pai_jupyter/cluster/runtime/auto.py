"""``pai cluster start --runtime auto``: which runtime, and why (``pai cluster start`` and ``status`` say it).

Docker only where an engine answers and has the images the README's examples run, or can pull them: an engine
that answers but cannot pull (no registry reachable) was picked, and ``make demo`` then failed on "image not
found". The images are ``PAI_JUPYTER_AUTO_IMAGES`` of the daemon (space-separated), by default those of
``make demo`` and the notebooks. A missing one is looked up in its registry (``docker manifest inspect``'s
question, nothing is downloaded); the first that cannot be found decides for the process runtime.
"""

from __future__ import annotations

import os
from pathlib import Path

IMAGES_ENV = "PAI_JUPYTER_AUTO_IMAGES"
EXAMPLE_IMAGES = ("busybox:latest", "python:3.11-slim", "python:3.11")
"""notebooks/jobs/quickstart.yaml and distributed-ps-worker.yaml (``make demo``); the README's, the notebooks' and
``pai run-notebook``'s python:3.11; the Estimator's python:3.11-slim."""
TIMEOUT_S = 5.0  # each call to the engine; a registry that does not answer costs at most this, once


def wanted_images() -> list[str]:
    return (os.environ.get(IMAGES_ENV) or " ".join(EXAMPLE_IMAGES)).split()


def docker_socket_present() -> bool:
    return bool(os.environ.get("DOCKER_HOST")) or Path("/var/run/docker.sock").exists()


def missing_images(images: list[str]) -> tuple[list[str], str]:
    """(the images the engine lacks and cannot pull, why not), ([], "") when it has or can pull them all. A lookup
    stops at the first that cannot be pulled: the rest are only named (as not there)."""
    import docker  # a slow import: only when an engine answers
    from docker.errors import DockerException, ImageNotFound

    client = docker.from_env(timeout=TIMEOUT_S)
    try:
        absent = []
        for image in images:
            try:
                client.images.get(image)
            except ImageNotFound:
                absent.append(image)
        for image in absent:
            try:
                client.api.inspect_distribution(image)
            except DockerException as exc:
                return absent, f"{image}: {getattr(exc, 'explanation', None) or exc}"
        return [], ""
    finally:
        client.close()


def choose() -> tuple[str, str]:
    """(runtime name, why) for ``auto``."""
    if not docker_socket_present():
        return "process", "no Docker engine here (no /var/run/docker.sock, no DOCKER_HOST)"
    from .docker import docker_available

    if not docker_available():
        return "process", "the Docker engine does not answer"
    try:
        missing, why = missing_images(wanted_images())
    except Exception as exc:  # the engine went away between the two questions
        return "process", f"the Docker engine could not be asked for images: {exc}"
    if missing:
        them = "it" if len(missing) == 1 else "them"
        return "process", (
            f"the Docker engine answers but lacks {', '.join(missing)} and cannot pull {them} ({why}); "
            f"pull or load {them}, then: pai cluster stop && pai cluster start --runtime docker"
        )
    return "docker", "the Docker engine answers and has, or can pull, the examples' images"


def explain(asked: str | None, configured: str | None) -> tuple[str, str]:
    """(runtime name, why): ``--runtime`` when given (not auto), else ``backend:`` of local/cluster.yaml, else
    ``choose()``."""
    if asked:
        return asked, f"asked for (--runtime {asked})"
    if configured:
        return configured, f"backend: {configured} in local/cluster.yaml"
    return choose()
