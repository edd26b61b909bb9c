"""The desktop plugin's tests' helpers: whether a desktop can run here, a job with one (running), the colours a
screenshot has."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from pai_jupyter.client import Client
from tests.polling import wait_for


def need_desktop() -> None:
    missing = [b for b in ("Xvnc", "vncpasswd", "websockify", "xsetroot") if not shutil.which(b)]
    if missing or not Path("/usr/share/novnc/core/rfb.js").exists():
        pytest.skip(
            f"no {' '.join(missing) or 'noVNC'} (apt-get install tigervnc-standalone-server tigervnc-tools "
            "websockify novnc xterm openbox x11-xserver-utils; .ci/run does)"
        )


def desktop_job(name: str) -> str:
    return json.dumps(
        {
            "jobName": name,
            "image": "pai-test/busybox:latest",
            "extras": {
                "com.microsoft.pai.runtimeplugin": [{"plugin": "desktop", "parameters": {"geometry": "800x600"}}]
            },
            "taskRoles": [
                {
                    "name": "main",
                    "taskNumber": 1,
                    "cpuNumber": 1,
                    "memoryMB": 512,
                    "gpuNumber": 0,
                    "command": "sleep 600",
                }
            ],
        }
    )


def running_desktop(pai: Client, name: str) -> str:
    """A job of ``desktop_job(name)`` submitted, once its desktop answers; its id."""
    need_desktop()
    job = pai.submit(desktop_job(name))
    pai.wait(job, until={"RUNNING"})
    wait_for(lambda: any(s.name == "desktop" and s.state == "running" for s in pai.services(job)), 60, "the desktop")
    return job


def count_colors(png: bytes) -> int:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    return len(img.resize((200, 150)).getcolors(maxcolors=200 * 150) or [])
