"""A PAI kernel is its owner's: another local OS account that subscribes to the
kernel's iopub, pings its heartbeat or sends to its shell gets nothing (its channels are CurveZMQ); a Jupyter
server killed with -9 leaves no kernel job running (the job's lease lapses and the daemon stops it, saying why);
the kernel's connection file is off the disk once the kernel has read it, and its temp dir with it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.daemon import Api
from tests.helpers.jupyter_fixture import start_jupyter
from tests.helpers.kernel import install_spec, job_processes, run_cell, running_kernel, start_kernel, stop_kernel
from tests.polling import wait_for

pytestmark = pytest.mark.slow
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="another OS account to attack from needs root to make")
SECRET = "the-owners-secret-4f1c"

# Run by root's python (so it can load zmq from where it is installed), which becomes the other account before it
# touches a socket: subscribes to iopub, pings the heartbeat and sends an unsigned kernel_info_request to the
# shell, then prints what came back on each within the time given.
SPY = r"""
import json, os, sys, time
import zmq
uid, gid, ports, seconds = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]), float(sys.argv[4])
os.setgroups([]); os.setgid(gid); os.setuid(uid)
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB); sub.setsockopt(zmq.SUBSCRIBE, b""); sub.connect(f"tcp://127.0.0.1:{ports['iopub']}")
hb = ctx.socket(zmq.REQ); hb.connect(f"tcp://127.0.0.1:{ports['hb']}"); hb.send(b"ping")
shell = ctx.socket(zmq.DEALER); shell.connect(f"tcp://127.0.0.1:{ports['shell']}")
header = {"msg_id": "spy", "msg_type": "kernel_info_request", "username": "spy", "session": "spy", "date": "",
          "version": "5.3"}
shell.send_multipart([b"<IDS|MSG>", b"", json.dumps(header).encode(), b"{}", b"{}", b"{}"])
names, got = {sub: "iopub", hb: "hb", shell: "shell"}, {"iopub": [], "hb": [], "shell": []}
poller = zmq.Poller()
for s in names:
    poller.register(s, zmq.POLLIN)
print(f"READY as uid {os.getuid()}", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for s, _ in poller.poll(100):
        got[names[s]].append(b"|".join(s.recv_multipart()).decode(errors="replace"))
print(json.dumps(got), flush=True)
"""


@pytest.fixture
def other_account() -> Iterator[pwd.struct_passwd]:
    """A fresh system account with no home, removed at the end: a local user who is not the kernel's owner."""
    name = f"pai-spy-{secrets.token_hex(3)}"
    subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def owned(daemon: Api, kernelspecs: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, Any, Any]]:
    """A running PAI kernel of the cluster's owner (its loop, manager and client); shut down at the end."""
    install_spec()
    loop = asyncio.new_event_loop()
    km, kc = start_kernel(loop)
    try:
        yield loop, km, kc
    finally:
        stop_kernel(loop, km, kc)


@root_only
def test_another_account_gets_nothing_from_the_kernels_ports(owned: Any, other_account: pwd.struct_passwd) -> None:
    loop, km, kc = owned
    ports = {label: getattr(km, f"{label}_port") for label in ("shell", "iopub", "hb")}
    spy = subprocess.Popen(
        [sys.executable, "-c", SPY, str(other_account.pw_uid), str(other_account.pw_gid), json.dumps(ports), "6"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert spy.stdout is not None
        ready = spy.stdout.readline()
        assert ready.strip() == f"READY as uid {other_account.pw_uid}", (ready, spy.stderr.read() if spy.stderr else "")
        code = f"import time\nfor i in range(20):\n    print({SECRET!r}, i, flush=True)\n    time.sleep(0.1)"
        reply, text = loop.run_until_complete(run_cell(kc, code))
        assert reply["status"] == "ok" and text.count(SECRET) == 20  # the owner's client reads every line
        out, err = spy.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            spy.kill()
    got = json.loads(out.strip().splitlines()[-1])
    assert got == {"iopub": [], "hb": [], "shell": []}, (got, err)  # not the code, not the output, not even a pong


def edit_spec(kernelspecs: Path, **config: Any) -> None:
    spec = kernelspecs / "kernels" / "pai-test" / "kernel.json"
    doc = json.loads(spec.read_text())
    doc["metadata"]["kernel_provisioner"]["config"].update(config)
    spec.write_text(json.dumps(doc))


def kernel_connection_file(job_name: str) -> Path:
    """The connection file the kernel of ``job_name`` was started with (its command line names it)."""
    for proc in job_processes(job_name):
        argv = proc.cmdline()
        if len(argv) > 3 and argv[1] == "-c" and "/pai-kernel-" in argv[3]:
            return Path(argv[3])
    raise AssertionError(f"no kernel process of {job_name}: {[p.cmdline()[:2] for p in job_processes(job_name)]}")


def _connection_file_or_none(job_name: str) -> Path | None:
    try:
        return kernel_connection_file(job_name)
    except AssertionError:  # the launcher has not started the kernel yet
        return None


def test_a_jupyter_server_killed_with_9_leaves_no_kernel_job_running(
    daemon: Api, kernelspecs: Path, tmp_path: Path
) -> None:
    install_spec()
    edit_spec(kernelspecs, lease_seconds=3)
    server = start_jupyter(tmp_path / "jupyter", daemon.home)
    try:
        r = server.http().post("api/kernels", json={"name": "pai-test"})
        assert r.status_code == 201, r.text  # a pending kernel: its job is submitted and started after the answer
        [job] = wait_for(lambda: daemon.http.get("/api/v2/jobs").json(), 60, "the kernel's job to be submitted")
        name = job["name"]
        wait_for(
            lambda: daemon.detail(f"{job['username']}~{name}")["jobStatus"]["state"] == "RUNNING",
            60,
            "the kernel's job to run",
        )
        conn = wait_for(lambda: _connection_file_or_none(name), 60, "the kernel to start in its task")
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(30)
        detail = daemon.wait(f"{job['username']}~{name}", {"STOPPED"}, timeout=30)
    finally:
        server.stop()
    why = detail["jobStatus"]["appExitDiagnostics"]
    assert "its Jupyter server stopped renewing the kernel's lease (not renewed for 3 s)" in why, why
    wait_for(lambda: not job_processes(name), 30, f"the processes of {name} to end")
    assert not conn.parent.exists()  # the kernel read its connection file, then removed it with its temp dir


def test_a_live_server_keeps_renewing_while_a_cell_runs_longer_than_the_lease(daemon: Api, kernelspecs: Path) -> None:
    install_spec()
    edit_spec(kernelspecs, lease_seconds=2.5)

    async def scenario() -> tuple[dict[str, Any], str, str]:
        async with running_kernel() as (km, kc):
            reply, text = await run_cell(kc, "import time; time.sleep(8); print('slept')")  # three leases long
            return reply, text, daemon.detail(km.provisioner.job_id)["jobStatus"]["state"]

    reply, text, state = asyncio.run(scenario())
    assert reply["status"] == "ok" and text.strip() == "slept" and state == "RUNNING"
