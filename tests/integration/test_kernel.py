"""The PAI kernel against a real daemon (process runtime): nbclient runs a notebook whose kernel is a PAI job;
interrupt, restart, shutdown, kernel death, a job that can never start, the masked key, another user's view."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.daemon import Api
from tests.helpers.kernel import (
    install_spec,
    interrupt_a_loop,
    job_processes,
    remote_profile,
    run_cell,
    run_notebook,
    running_kernel,
    start_kernel,
    stop_kernel,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def kernel(daemon: Api, kernelspecs: Path, tmp_path: Path) -> Iterator[tuple[Any, Any, Path]]:
    """A started PAI kernel (manager, client, notebook dir); shut down at the end."""
    install_spec()
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    loop = asyncio.new_event_loop()
    km, kc = start_kernel(loop, cwd=str(nbdir), env={**os.environ, "JPY_SESSION_NAME": "my nb.ipynb"})
    try:
        yield loop, (km, kc), nbdir
    finally:
        stop_kernel(loop, km, kc)


def test_nbclient_runs_a_notebook_in_a_pai_job(daemon: Api, kernelspecs: Path, tmp_path: Path) -> None:
    install_spec()
    nbdir = tmp_path / "analysis"
    nbdir.mkdir()
    (nbdir / "data.txt").write_text("beside the notebook")
    texts = run_notebook(
        [
            "import os; print(os.environ['PAI_JOB_NAME'], os.getcwd(), sep='|')",
            "print(open('data.txt').read()); open('written.txt', 'w').write('x')",
            "print('PAI_KERNEL_KEY' in os.environ, 'PAI_JOB_NAME' in os.environ)",
        ],
        nbdir,
    )
    job_name, cwd = texts[0].strip().split("|")
    assert cwd == str(nbdir)  # the embedded cluster's owner: the kernel works in the notebook's directory
    assert job_name.startswith("analysis-kernel-")
    assert texts[1].strip() == "beside the notebook"
    assert (nbdir / "written.txt").read_text() == "x"
    assert texts[2].strip() == "False True"  # the key left the kernel's environment
    detail = daemon.detail(f"{daemon.http.get('/api/v2/info').json()['user']}~{job_name}")
    assert detail["jobStatus"]["state"] == "STOPPED"  # nbclient shut the kernel down: the job is stopped
    assert not job_processes(job_name)


def test_the_key_is_a_masked_secret_and_other_users_see_nothing(kernel: Any, daemon: Api) -> None:
    _, (km, _kc), _ = kernel
    job = km.provisioner.job_id
    config = daemon.http.get(f"/api/v2/jobs/{job}/config").text
    key = km.session.key.decode()
    assert key not in config and "secrets: '******'" in config, config  # the whole block, as OpenPAI
    assert key not in json.dumps(daemon.detail(job))
    assert key not in daemon.log(job, role="kernel")
    # another user: the kernel's job (its ports) is neither listed nor readable
    body = {"name": "mallory", "password": "not-the-owner"}
    token = daemon.http.post("/api/v2/local/users", json=body).json()["token"]
    other = daemon.as_user(token)
    assert other.http.get(f"/api/v2/jobs/{job}").status_code == 404
    listed = other.http.get("/api/v2/jobs", params={"username": job.split("~")[0]}).json()
    names = [j["name"] for j in (listed["data"] if isinstance(listed, dict) else listed)]
    assert job.split("~")[1] not in names
    for cmd in (j.cmdline() for j in job_processes(job.split("~")[1])):
        assert key not in " ".join(cmd)  # nor on any command line


def test_interrupt_a_long_loop_and_the_kernel_lives_on(kernel: Any) -> None:
    loop, (km, kc), _ = kernel
    reply, after, text = loop.run_until_complete(interrupt_a_loop(km, kc))
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    assert after["status"] == "ok" and text.strip() == "True 42", (after, text)  # same kernel: n survived
    assert km.provisioner.incarnation == 0


def test_restart_keeps_the_job_and_starts_a_fresh_kernel(kernel: Any, daemon: Api) -> None:
    loop, (km, kc), _ = kernel
    job = km.provisioner.job_id
    loop.run_until_complete(run_cell(kc, "x = 41"))
    loop.run_until_complete(km.restart_kernel())
    loop.run_until_complete(kc.wait_for_ready(timeout=120))
    assert km.provisioner.job_id == job and km.provisioner.incarnation == 1
    _, text = loop.run_until_complete(run_cell(kc, "print('x' in globals())"))
    assert text.strip() == "False"  # a fresh kernel
    assert daemon.detail(job)["jobStatus"]["state"] == "RUNNING"


def test_restart_of_a_dead_kernel_submits_a_new_job(kernel: Any, daemon: Api, caplog: pytest.LogCaptureFixture) -> None:
    loop, (km, kc), _ = kernel
    first = km.provisioner.job_id
    kc.execute("import os; os._exit(3)")
    with caplog.at_level(logging.ERROR):
        code = loop.run_until_complete(asyncio.wait_for(km.provisioner.wait(), 60))
    assert code == 3
    detail = daemon.detail(first)
    assert detail["jobStatus"]["state"] == "FAILED"
    died = [r.getMessage() for r in caplog.records if "died" in r.getMessage()]
    assert died and "exit code 3" in died[0] and first in died[0], caplog.text  # reported with its exit code
    assert "kernel 0 ended with exit code 3" in died[0]  # and the last lines of its log
    old_ports = [km.shell_port, km.iopub_port, km.stdin_port, km.control_port, km.hb_port]
    loop.run_until_complete(km.restart_kernel(now=True))
    assert km.provisioner.job_id != first
    # the new job asked for the old ports (free again once the old job ended): the connected client carries on
    assert [km.shell_port, km.iopub_port, km.stdin_port, km.control_port, km.hb_port] == old_ports
    loop.run_until_complete(kc.wait_for_ready(timeout=120))
    _, text = loop.run_until_complete(run_cell(kc, "print(1 + 1)"))
    assert text.strip() == "2"


def test_shutdown_stops_the_job_and_leaves_no_process(kernel: Any, daemon: Api) -> None:
    loop, (km, _kc), _ = kernel
    job = km.provisioner.job_id
    assert job_processes(job.split("~")[1])  # the kernel's processes are there while it runs
    loop.run_until_complete(km.shutdown_kernel())
    detail = daemon.detail(job)
    assert detail["jobStatus"]["state"] == "STOPPED"
    assert not job_processes(job.split("~")[1])
    assert "kernel 0 ended with exit code 0" in daemon.log(job, role="kernel")  # it ended cleanly, then stopped


def test_a_job_that_can_never_start_is_a_clear_start_error(daemon: Api, kernelspecs: Path) -> None:
    from jupyter_client.manager import AsyncKernelManager

    from pai_jupyter.kernel.provisioner import KernelStartError

    install_spec(cpu=64)  # the test daemon has 8 CPUs
    km = AsyncKernelManager(kernel_name="pai-test")
    with pytest.raises(KernelStartError, match="can never run here") as err:
        asyncio.run(km.start_kernel())
    assert "64" in str(err.value)
    assert not daemon.http.get("/api/v2/jobs").json()  # nothing was left queued


def test_a_python_without_ipykernel_is_a_clear_start_error(daemon: Api, kernelspecs: Path) -> None:
    from jupyter_client.manager import AsyncKernelManager

    from pai_jupyter.kernel.provisioner import KernelStartError

    install_spec(python="/bin/false-python")
    km = AsyncKernelManager(kernel_name="pai-test")
    with pytest.raises(KernelStartError) as err:
        asyncio.run(km.start_kernel())
    message = str(err.value)
    assert "could not start" in message or "ended before its kernel answered" in message
    assert "FAILED, exit code 127" in message and "ipykernel" in message, message
    assert "false-python" in message  # the log's last lines say what was missing


def test_a_remote_profile_connects_to_the_tasks_host_and_ports(
    daemon: Api, kernelspecs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install_spec(profile=remote_profile(daemon))
    with caplog.at_level(logging.INFO):
        [text] = run_notebook(["import os; print(os.getcwd(), os.environ['PAI_TASK_DIR'], sep='|')"], tmp_path)
    assert "kernel reached directly (127.0.0.1:" in caplog.text  # tunnel: auto, and the ports answer
    cwd, task_dir = text.strip().split("|")
    assert cwd != str(tmp_path) and cwd.startswith(task_dir)  # not the notebook's folder: the job's own dir
    body = daemon.http.get("/api/v2/jobs").json()
    assert [j["state"] for j in (body["data"] if isinstance(body, dict) else body)] == ["STOPPED"]


def test_a_kernel_that_never_answers_says_how_the_server_reaches_it(
    daemon: Api, kernelspecs: Path, tmp_path: Path
) -> None:
    from jupyter_client.manager import AsyncKernelManager

    from pai_jupyter.kernel.provisioner import KernelStartError

    silent = tmp_path / "silent-python"
    silent.write_text("#!/bin/sh\necho a python that never starts a kernel\nexec sleep 600\n")
    silent.chmod(0o755)
    install_spec(profile=remote_profile(daemon), python=str(silent), start_timeout=3, tunnel="never")
    km = AsyncKernelManager(kernel_name="pai-test")
    with pytest.raises(KernelStartError) as err:
        asyncio.run(km.start_kernel())
    message = str(err.value)
    assert "did not answer at 127.0.0.1:" in message and "within 3 s" in message, message
    assert "tunnel: never" in message and "directly" in message  # the path used is said plainly
    assert "a python that never starts a kernel" in message
    body = daemon.http.get("/api/v2/jobs").json()
    job = (body["data"] if isinstance(body, dict) else body)[0]
    assert job["state"] == "STOPPED" and not job_processes(job["name"])


def test_a_python_without_the_ipykernel_module_says_so(daemon: Api, kernelspecs: Path, tmp_path: Path) -> None:
    import subprocess

    from jupyter_client.manager import AsyncKernelManager

    from pai_jupyter.kernel.provisioner import KernelStartError

    bare = tmp_path / "bare-venv"  # a python of its own with nothing installed
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    install_spec(python=str(bare / "bin" / "python"))
    km = AsyncKernelManager(kernel_name="pai-test")
    with pytest.raises(KernelStartError) as err:
        asyncio.run(km.start_kernel())
    message = str(err.value)
    assert "FAILED, exit code 1" in message and f"{bare}/bin/python has no ipykernel" in message, message
    assert "the image must have python and ipykernel" in message


def test_a_cluster_that_does_not_answer_is_a_clear_start_error(pai_home: Path, kernelspecs: Path) -> None:
    import socket

    from jupyter_client.manager import AsyncKernelManager

    from pai_jupyter.client.profiles import Profile, upsert_profile
    from pai_jupyter.kernel.provisioner import KernelStartError

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    upsert_profile(Profile(name="gone", url=f"http://127.0.0.1:{port}", username="me", token="t"))
    install_spec(profile="gone")
    with pytest.raises(KernelStartError, match=r"cannot start: nothing answers for profile 'gone'"):
        asyncio.run(AsyncKernelManager(kernel_name="pai-test").start_kernel())


def test_a_kernel_out_of_memory_is_reported_with_the_jobs_diagnostics(
    daemon: Api, kernelspecs: Path, caplog: pytest.LogCaptureFixture
) -> None:

    install_spec(memory_mb=300)

    async def scenario() -> int | None:
        async with running_kernel(now=True) as (km, kc):
            kc.execute("blocks = [bytearray(2**20) for _ in range(1000)]")  # ~1 GB in a 300 MB job
            return await asyncio.wait_for(km.provisioner.wait(), 120)

    with caplog.at_level(logging.ERROR):
        code = asyncio.run(scenario())
    assert code not in (0, None)
    died = [r.getMessage() for r in caplog.records if "died" in r.getMessage()]
    assert died and "FAILED" in died[0] and "out of memory" in died[0], caplog.text
