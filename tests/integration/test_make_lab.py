"""After the README's `make lab`, Lab's own terminal has `pai` on its PATH and the launcher offers
"Python on PAI" (both needed steps nobody had told the user about). Runs the Makefile's recipe for real, on the
venv this suite runs in, with its own Jupyter dirs and cluster home."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tornado.websocket import websocket_connect

from pai_jupyter.cluster import control
from tests.helpers.daemon import kill_leftovers
from tests.helpers.jupyter_fixture import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent


def _stamped() -> bool:
    """The Makefile's install stamp is there, so `make lab` starts the lab without installing again."""

    out = subprocess.run("cat pyproject.toml | cksum", shell=True, cwd=ROOT, capture_output=True, text=True)
    return (VENV / f".installed-{out.stdout.split()[0]}").exists()


async def _terminal_says(base: str, token: str, command: str) -> str:
    """What ``command`` prints in a new terminal of the Jupyter server (its own websocket)."""
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"token {token}"}) as http:
        name = (await http.post("/api/terminals")).json()["name"]
    ws = await websocket_connect(f"{base.replace('http', 'ws')}/terminals/websocket/{name}?token={token}")
    ws.write_message(json.dumps(["stdin", f"{command}; echo END-$((6*7))\r"]))
    seen = ""
    deadline = time.monotonic() + 30
    while "END-42" not in seen and time.monotonic() < deadline:
        message = await asyncio.wait_for(ws.read_message(), timeout=30)
        if message is None:
            break
        kind, *rest = json.loads(message)
        if kind == "stdout":
            seen += rest[0]
    ws.close()
    return seen


def test_make_lab_puts_pai_on_the_terminals_path_and_the_pai_kernel_in_the_launcher(tmp_path: Path) -> None:
    """The kernelspec goes into the venv (``--sys-prefix``): one in the user's Jupyter dir is listed by every Jupyter
    of the user, a task's own JupyterLab too, and `make lab` skipped its install when any ``pai`` kernelspec (an
    older one of the user's, here) was there. What the README's examples need is installed (papermill)."""
    if not _stamped():
        pytest.skip(f"{VENV} has no install stamp for this pyproject.toml: `make lab` would install first")
    port, token, home = free_port(), "make-lab-test-token", tmp_path / "home"
    old = tmp_path / "data" / "kernels" / "pai"  # what an older `make lab` left in the user's dir
    old.mkdir(parents=True)
    (old / "kernel.json").write_text(
        json.dumps({"argv": ["python3"], "display_name": "an older pai", "language": "py"})
    )
    ours = VENV / "share" / "jupyter" / "kernels" / "pai"
    aside = tmp_path / "venv-pai-kernelspec"
    if ours.exists():  # this venv's own, from an earlier `make lab`: the recipe must make it again (and it is put back)
        ours.rename(aside)
    env = {
        **os.environ,
        "PAI_JUPYTER_HOME": str(home),
        "JUPYTER_TOKEN": token,
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",  # a new shell's: no venv on it
    }
    log = (tmp_path / "make.log").open("wb")
    make = subprocess.Popen(
        ["make", "-s", "lab", f"VENV={VENV}", f"LAB_PORT={port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/api/status", params={"token": token}, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert make.poll() is None and time.monotonic() < deadline, (tmp_path / "make.log").read_text()
            time.sleep(0.3)
        assert json.loads((ours / "kernel.json").read_text())["display_name"].startswith("Python 3 on PAI")
        assert sorted(p.name for p in (tmp_path / "data" / "kernels").iterdir()) == ["pai"]  # nothing user-wide
        assert (old / "kernel.json").read_text().count("an older pai") == 1
        said = asyncio.run(_terminal_says(base, token, "command -v pai; command -v papermill"))
        assert f"{VENV}/bin/pai" in said and f"{VENV}/bin/papermill" in said, said
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        make.wait(timeout=30)
        control.stop(home)
        kill_leftovers(home)
        shutil.rmtree(ours, ignore_errors=True)  # the venv as it was: other tests list the kernelspecs Jupyter finds
        if aside.exists():
            aside.rename(ours)
