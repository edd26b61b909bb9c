"""The submitted config from the job list, ``%pai_status --config`` and ``pai status --config``;
Ctrl-C during ``pai submit --wait`` says the job keeps running and how to stop it; a TensorBoard that
``%pai_tensorboard --logdir`` started ends with its kernel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import psutil
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from pai_jupyter.client import Client
from pai_jupyter.notebook.joblist import JobList
from pai_jupyter.notebook.magics import PaiMagics
from tests.helpers.cli import PAI, pai
from tests.helpers.daemon import Api, v1
from tests.polling import wait_for

SECRET_JOB = (
    "protocolVersion: 2\nname: withconf\ntype: job\nsecrets: {token: hunter2}\n"
    "prerequisites: [{name: i, type: dockerimage, uri: busybox}]\n"
    "taskRoles:\n  main: {instances: 1, dockerImage: i, resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0},"
    " commands: [echo configured]}\n"
)


def test_the_submitted_config_is_shown_everywhere_secrets_masked(daemon: Api, tmp_path: Path) -> None:
    job = Client().submit(SECRET_JOB)
    daemon.wait(job)
    r = pai("status", "withconf", "--config", home=daemon.home)
    assert r.returncode == 0 and "name: withconf" in r.stdout and "echo configured" in r.stdout
    assert "hunter2" not in r.stdout and "******" in r.stdout
    jl = JobList(client=Client(), interval=0)
    try:
        jl.act("config", job)
        shown = jl.panel.children[0].value
        assert "submitted config of <code>" in shown and "echo configured" in shown and "hunter2" not in shown
        assert 'download="withconf.yaml"' in shown
    finally:
        jl.close()
    shell = InteractiveShell.instance()
    magics = PaiMagics(shell)
    shell.register_magics(magics)
    try:
        with capture_output() as c:
            shell.run_line_magic("pai_status", "withconf --config")
    finally:
        magics.close()
    texts = [o.data.get("text/plain", "") for o in c.outputs]
    assert "SUCCEEDED" in texts[0] and "name: withconf" in texts[1] and "hunter2" not in "".join(texts)


def test_ctrl_c_during_submit_wait_says_the_job_keeps_running(daemon: Api, tmp_path: Path) -> None:
    path = tmp_path / "long.json"
    path.write_text(v1("longwait", "sleep 120"))
    env = {**os.environ, "PAI_JUPYTER_HOME": str(daemon.home)}
    env.pop("PAI_PROFILE", None)
    proc = subprocess.Popen(
        [*PAI, "submit", str(path), "--wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        job = proc.stdout.readline().strip()  # type: ignore[union-attr]
        assert job.endswith("~longwait")
        wait_for(lambda: daemon.detail(job)["jobStatus"]["state"] == "RUNNING", 30, "the job to run")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert f"{job} was submitted and keeps running" in err and f"pai stop {job}" in err
    assert daemon.detail(job)["jobStatus"]["state"] == "RUNNING"
    daemon.stop(job)


def test_a_logdir_tensorboard_ends_with_its_kernel(pai_home: Path, tmp_path: Path) -> None:
    from jupyter_client.manager import start_new_kernel

    from pai_jupyter.notebook import tensorboard

    logdir = tmp_path / "tb"
    for how in ("shutdown", "kill"):
        km, kc = start_new_kernel(kernel_name="python3", env={**os.environ, "PAI_JUPYTER_HOME": str(pai_home)})
        try:
            reply = kc.execute_interactive(f"%load_ext pai_jupyter\n%pai_tensorboard --logdir {logdir}", timeout=120)
            assert reply["content"]["status"] == "ok"
            info = json.loads(tensorboard._info_file(str(logdir.resolve())).read_text())
            assert psutil.pid_exists(info["pid"])
        finally:
            kc.stop_channels()
            if how == "shutdown":
                km.shutdown_kernel(now=False)
            else:
                os.kill(km.provisioner.pid, signal.SIGKILL)  # no clean exit: the TensorBoard goes all the same
                km.cleanup_resources()
        pid = int(info["pid"])
        wait_for(
            lambda pid=pid: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie",
            30,
            f"TensorBoard to end after the kernel's {how}",
        )
