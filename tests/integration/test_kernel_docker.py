"""The PAI kernel on the Docker runtime: an image without python, and an image that does not exist, are clear
kernel start errors (the state, exit code, diagnostics and what the image lacks), and leave nothing running."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.helpers.daemon import Api
from tests.helpers.kernel import install_spec

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("kernelspecs")]


def start_error(kernel_name: str) -> str:
    from jupyter_client.manager import AsyncKernelManager

    from pai_jupyter.kernel.provisioner import KernelStartError

    km = AsyncKernelManager(kernel_name=kernel_name)
    with pytest.raises(KernelStartError) as err:
        asyncio.run(km.start_kernel(cwd=str(Path.cwd())))
    return str(err.value)


def only_final_jobs(api: Api) -> list[str]:
    body = api.http.get("/api/v2/jobs").json()
    jobs = body["data"] if isinstance(body, dict) else body
    return [j["state"] for j in jobs]


def test_an_image_without_python_is_a_clear_start_error(docker_daemon: Api) -> None:
    install_spec(image="pai-test/busybox:latest")  # busybox: a shell, no python
    message = start_error("pai-test")
    assert "FAILED, exit code 127" in message, message
    assert "the image must have python and ipykernel" in message and "pai-test/busybox:latest" in message
    assert "python3: not found" in message  # the log's last lines say what was missing
    assert only_final_jobs(docker_daemon) == ["FAILED"]


def test_a_missing_image_is_a_clear_start_error(docker_daemon: Api) -> None:
    install_spec(image="pai-test/no-such-image:never")
    message = start_error("pai-test")
    assert "FAILED, exit code 254: image not found" in message, message
    assert "pai-test/no-such-image:never" in message and "not found" in message.lower()
    assert only_final_jobs(docker_daemon) == ["FAILED"]
