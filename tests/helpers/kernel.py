"""The PAI kernel's tests' helpers: its kernelspec installed, a kernel started and stopped, a cell or a notebook
run in it, an interrupted loop, the processes of its job, a profile of a daemon reached as a remote one."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import psutil

from tests.helpers.daemon import Api


def install_spec(name: str = "pai-test", **kw: Any) -> None:
    from pai_jupyter.kernel.kernelspec import install

    kw.setdefault("memory_mb", 1024)
    if kw.get("profile"):  # a "remote" cluster (this daemon seen from afar): the kernel runs the image's python,
        kw.setdefault("python", sys.executable)  # which on this host's process runtime is the workbench's (tasks
    install(name, **kw)  # get a system PATH, whose python3 has no ipykernel)


def job_processes(job_name: str) -> list[psutil.Process]:
    """Live processes whose environment says they belong to ``job_name`` (the kernel, its launcher, the shell)."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("PAI_JOB_NAME") == job_name and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


async def run_cell(kc: Any, code: str, timeout: float = 60) -> tuple[dict[str, Any], str]:
    """Execute ``code``; (execute_reply content, the text it printed)."""
    out: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append(msg["content"]["ename"])

    for _ in range(100):  # ipykernel aborts what arrives just after an error (stop_on_error): send it again
        out.clear()
        reply = await kc.execute_interactive(code, timeout=timeout, output_hook=hook)
        if reply["content"]["status"] != "aborted":
            break
    return reply["content"], "".join(out)


def start_kernel(loop: asyncio.AbstractEventLoop, **start: Any) -> tuple[Any, Any]:
    """The `pai-test` kernel started on ``loop`` (``start``: start_kernel's arguments) and its client, ready."""
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(kernel_name="pai-test")
    loop.run_until_complete(km.start_kernel(**start))
    kc = km.client()
    kc.start_channels()
    loop.run_until_complete(kc.wait_for_ready(timeout=120))
    return km, kc


def stop_kernel(loop: asyncio.AbstractEventLoop, km: Any, kc: Any) -> None:
    """Shut down what start_kernel started (if a test has not) and close the loop."""
    kc.stop_channels()
    if km.has_kernel:
        loop.run_until_complete(km.shutdown_kernel(now=True))
    loop.close()


@contextlib.asynccontextmanager
async def running_kernel(now: bool = False) -> AsyncIterator[tuple[Any, Any]]:
    """start_kernel on the running event loop; shut down (``now``: at once) when the block ends."""
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(kernel_name="pai-test")
    await km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=120)
        yield km, kc
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=now)


async def interrupt_a_loop(km: Any, kc: Any) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Run an endless loop, interrupt it once it runs, then a cell that reads its counter: (the loop's execute
    reply, the next cell's reply, what that cell printed: "True 42" where the kernel lived on)."""
    msg_id = kc.execute(
        "import time\nn = 0\nprint('looping', flush=True)\nwhile True:\n    n += 1\n    time.sleep(0.001)"
    )
    while True:  # the loop runs once the cell has said so
        msg = await kc.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") == msg_id and "looping" in msg["content"].get("text", ""):
            break
    await km.interrupt_kernel()
    reply = await kc._async_get_shell_msg(timeout=60)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = await kc._async_get_shell_msg(timeout=60)
    after, text = await run_cell(kc, "print(n >= 0, 6 * 7)")
    return reply["content"], after, text


def run_notebook(cells: list[str], folder: Path) -> list[str]:
    """Run a notebook of these code cells in folder with the pai-test kernel (nbclient, as `jupyter execute`
    does); each cell's first output text."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code) for code in cells]
    NotebookClient(
        nb, kernel_name="pai-test", timeout=120, startup_timeout=120, resources={"metadata": {"path": str(folder)}}
    ).execute()
    return [cell.outputs[0]["text"] for cell in nb.cells]


def remote_profile(api: Api) -> str:
    """A profile that is not the embedded one (as a real OpenPAI would be), pointing at the test daemon."""
    from pai_jupyter.client.profiles import Profile, upsert_profile

    user = api.http.get("/api/v2/info").json()["user"]
    upsert_profile(Profile(name="faraway", url=api.url, username=user, token=api.token))
    return "faraway"
