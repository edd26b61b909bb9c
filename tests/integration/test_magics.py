"""The magics in a real IPython shell against a real daemon: run_cell_magic / run_line_magic + capture_output."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from pai_jupyter.client import Client
from pai_jupyter.cluster.paths import os_user
from pai_jupyter.notebook.magics import PaiMagics
from tests.helpers.daemon import Api, v1
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
USER = os_user()  # the local profile's user


@pytest.fixture
def ip(daemon: Api) -> Iterator[InteractiveShell]:
    shell = InteractiveShell.instance()
    magics = PaiMagics(shell)
    shell.register_magics(magics)  # a fresh client cache per test: each test has its own daemon
    shell.user_ns.pop("job", None)
    yield shell
    magics.close()


def texts(captured: Any) -> list[str]:
    return [o.data.get("text/plain", "") for o in captured.outputs]


def htmls(captured: Any) -> list[str]:
    return [o.data.get("text/html", "") for o in captured.outputs]


def submit(ip: InteractiveShell, line: str, cell: str) -> Any:
    with capture_output() as c:
        ip.run_cell_magic("pai_submit", line, cell)
    return c


def test_load_ext_registers_every_magic() -> None:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "pai_jupyter")
    for name in (
        "pai_jobs",
        "pai_status",
        "pai_logs",
        "pai_stop",
        "pai_clone",
        "pai_tensorboard",
        "pai_monitor",
        "pai_profile",
    ):
        assert shell.find_line_magic(name) is not None, name
    assert shell.find_cell_magic("pai_submit") is not None
    shell.run_line_magic("unload_ext", "pai_jupyter")
    assert shell.find_cell_magic("pai_submit") is None


def test_submit_returns_at_once_with_the_id_and_stores_the_job(ip: InteractiveShell, daemon: Api) -> None:
    c = submit(ip, "-o job", v1("quick", "sleep 30"))
    assert len(c.outputs) == 1 and texts(c)[0].startswith("submitted ")
    job_id = texts(c)[0].split()[1]
    assert job_id.endswith("~quick") and "%pai_stop" in texts(c)[0]
    assert f"<code>{job_id}</code>" in htmls(c)[0]
    job = ip.user_ns["job"]
    assert job.id == job_id and job.state in ("WAITING", "RUNNING")
    daemon.stop(job_id)


def test_wait_updates_one_status_line_and_reports_a_failure_with_its_exit_code(ip: InteractiveShell) -> None:
    c = submit(ip, "--wait -o job", v1("fails", "sleep 0.5; exit 7"))
    first, *rest = c.outputs
    assert not first.update and rest and all(o.update for o in rest)  # one line, rewritten in place
    assert any("RUNNING" in t for t in texts(c))
    assert texts(c)[-1].startswith(f"{ip.user_ns['job'].id}: FAILED, exit code 7")
    assert "exit code <b>7</b>" in htmls(c)[-1]
    assert ip.user_ns["job"].state == "FAILED" and ip.user_ns["job"].exit_code == 7


def test_follow_streams_the_log_into_the_cell_then_the_final_state(ip: InteractiveShell) -> None:
    c = submit(ip, "--follow", v1("follow", "echo first; sleep 0.3; echo second"))
    assert "first\nsecond\n" in c.stdout
    assert texts(c)[-1].endswith("SUCCEEDED, exit code 0 · 0 s") or "SUCCEEDED, exit code 0" in texts(c)[-1]


def test_interpolation_from_the_namespace_with_escapes(ip: InteractiveShell) -> None:
    ip.user_ns.update(greeting="hi there", cfg=type("Cfg", (), {"steps": 3})())
    cell = v1("interp", "echo {greeting} {cfg.steps} {{greeting}} ${HOME:+home}")
    submit(ip, "--wait", cell)
    with capture_output() as c:
        ip.run_line_magic("pai_logs", "interp --stream stdout")
    assert c.stdout.strip().endswith("hi there 3 {greeting} home")
    c = submit(ip, "", v1("nope", "echo {undefined_name}"))
    assert "'undefined_name' is not defined" in texts(c)[0] and "{{undefined_name}}" in texts(c)[0]
    c = submit(ip, "--raw --wait", v1("raw", "echo {undefined_name}"))
    assert "SUCCEEDED" in texts(c)[-1]


def test_a_bad_job_shows_field_paths_and_no_traceback(ip: InteractiveShell) -> None:
    c = submit(ip, "", v1("bad", "true", memoryMB=10, cpuNumber=0))
    text = texts(c)[0]
    assert text.startswith("invalid job (") and "taskRoles[0].memoryMB: 10 is below the minimum 100" in text
    assert "taskRoles[0].cpuNumber" in text and "Traceback" not in text + c.stdout + c.stderr
    assert "<code>taskRoles[0].memoryMB</code>" in htmls(c)[0]
    c = submit(ip, "", "protocolVersion: 2\nname: bad2\ntype: job\ntaskRoles: {}\n")
    assert texts(c)[0].startswith("invalid job") and "taskRoles" in texts(c)[0]
    with Client() as client:
        assert [j.name for j in client.list_jobs()] == []


def test_a_refused_submit_is_named_by_the_cells_after_it(ip: InteractiveShell) -> None:
    """After a job too big for the cluster was refused, %pai_status said only "no job was submitted
    from this notebook yet"."""
    c = submit(ip, "", v1("huge", "true", cpuNumber=64))
    assert "can never run here" in texts(c)[0], texts(c)
    with capture_output() as c:
        ip.run_line_magic("pai_status", "")
    text = texts(c)[0]
    assert "the last %%pai_submit submitted no job" in text and "can never run here" in text, text


def test_name_and_params(ip: InteractiveShell) -> None:
    cell = (ROOT / "notebooks/jobs/quickstart.yaml").read_text()
    c = submit(ip, "--wait --name qs2 --param greeting=bonjour -o job", cell)
    assert ip.user_ns["job"].id.endswith("~qs2") and "SUCCEEDED" in texts(c)[-1]
    with capture_output() as c:
        ip.run_line_magic("pai_logs", "qs2 --role worker --index 1 --stream stdout")
    assert "bonjour" in c.stdout and "I am worker 1 of 2" in c.stdout


def _interrupt_once(entered: threading.Event) -> threading.Thread:
    """Ctrl-C (SIGINT to this process) as soon as ``entered`` is set: the cell is then blocked where the test wants
    it (not after a fixed time, which a slow machine could spend still submitting)."""

    def run() -> None:
        if entered.wait(60):
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_interrupting_a_waiting_cell_leaves_the_job_running_and_says_how_to_stop(
    ip: InteractiveShell, daemon: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, real = threading.Event(), Client.wait

    def waiting(self: Client, *a: Any, **kw: Any) -> Any:  # the cell's status line, until the job ends
        entered.set()
        return real(self, *a, **kw)

    monkeypatch.setattr(Client, "wait", waiting)
    interrupter = _interrupt_once(entered)
    c = submit(ip, "--wait -o job", v1("long", "sleep 60"))
    interrupter.join(10)
    job_id = ip.user_ns["job"].id
    assert f"{job_id} was submitted and keeps running; stop it with %pai_stop {job_id}" in texts(c)[-1]
    assert daemon.detail(job_id)["jobStatus"]["state"] in ("WAITING", "RUNNING")
    with capture_output() as c:
        ip.run_line_magic("pai_stop", job_id)
    assert texts(c) == [f"stopping {job_id}"]
    assert daemon.wait(job_id)["jobStatus"]["state"] == "STOPPED"


def test_stop_on_interrupt_stops_the_job(ip: InteractiveShell, daemon: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    entered, real = threading.Event(), Client.follow

    def following(self: Client, *a: Any, **kw: Any) -> Iterator[str]:  # the cell shows the log as it comes
        for chunk in real(self, *a, **kw):
            entered.set()
            yield chunk

    monkeypatch.setattr(Client, "follow", following)
    interrupter = _interrupt_once(entered)
    c = submit(ip, "--follow --stop-on-interrupt -o job", v1("long2", "echo started; sleep 60"))
    interrupter.join(10)
    job_id = ip.user_ns["job"].id
    assert texts(c)[-1] == f"interrupted: stopping {job_id}"
    assert daemon.wait(job_id)["jobStatus"]["state"] == "STOPPED"


def test_an_interrupt_during_the_submit_is_held_until_the_job_is_in(
    ip: InteractiveShell, daemon: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never half-submitted: Ctrl-C while the request is in flight waits for the answer, then reports the job."""
    real = Client.submit

    def interrupted_submit(self: Client, *a: Any, **kw: Any) -> str:
        os.kill(os.getpid(), signal.SIGINT)  # delivered now, in the middle of the submit
        return real(self, *a, **kw)

    monkeypatch.setattr(Client, "submit", interrupted_submit)
    c = submit(ip, "", v1("held", "sleep 60"))
    job_id = f"{USER}~held"
    assert daemon.detail(job_id)["jobStatus"]["state"] in ("WAITING", "RUNNING")
    assert f"{job_id} was submitted and keeps running" in texts(c)[-1]
    daemon.stop(job_id)


def test_line_magics(ip: InteractiveShell, daemon: Api) -> None:
    submit(ip, "--wait", v1("one", "echo out; echo err >&2"))
    submit(ip, "--wait", v1("two", "exit 2"))
    with capture_output():
        frame = ip.run_line_magic("pai_jobs", "")
    assert list(frame["name"]) == ["two", "one"]
    assert list(frame.columns[:9]) == [
        "name",
        "submitted",
        "user",
        "duration",
        "virtual cluster",
        "retries",
        "tasks",
        "GPUs",
        "state",
    ]
    assert list(ip.run_line_magic("pai_jobs", "--state failed")["name"]) == ["two"]
    with capture_output() as c:
        ip.run_line_magic("pai_status", "two")
        ip.run_line_magic("pai_logs", "one --stream stderr")
        ip.run_line_magic("pai_logs", "one -f --stream stdout")
    assert texts(c)[0].startswith(f"{USER}~two: FAILED, exit code 2")
    assert "<table>" in htmls(c)[0] and c.stdout.startswith("err\n") and c.stdout.endswith("\nout\n")
    with capture_output() as c:
        ip.run_line_magic("pai_clone", "one --name one-again --wait")
        ip.run_line_magic("pai_status", "")  # the last job: the clone
    assert "one-again: SUCCEEDED" in texts(c)[-2] and "one-again: SUCCEEDED" in texts(c)[-1]
    with capture_output() as c:
        ip.run_line_magic("pai_status", "missing")
        ip.run_line_magic("pai_profile", "nosuch")
        ip.run_line_magic("pai_profile", "local")
    assert texts(c)[0].startswith("pai: ") and "no profile named 'nosuch'" in texts(c)[1]
    assert texts(c)[2].startswith("magics use profile 'local'")


def test_tensorboard_magic_embeds_the_proxied_route_or_says_why_not(ip: InteractiveShell, daemon: Api) -> None:
    submit(ip, "--wait", v1("notb", "true"))
    with capture_output():
        note = ip.run_line_magic("pai_tensorboard", "notb")
    assert "runs no TensorBoard" in note.data
    plugin = {"com.microsoft.pai.runtimeplugin": [{"plugin": "tensorboard", "parameters": {"logdir": "tb"}}]}
    import json

    doc = json.loads(v1("withtb", "sleep 30"))
    doc["extras"] = plugin
    submit(ip, "", json.dumps(doc))
    with capture_output():
        frame = ip.run_line_magic("pai_tensorboard", "withtb")
    job_id = f"{USER}~withtb"
    assert f'src="/pai/jobs/{job_id}/main/0/tensorboard/"' in frame.data  # waiting or running: it comes up
    daemon.stop(job_id)
    daemon.wait(job_id)
    with capture_output():
        note = ip.run_line_magic("pai_tensorboard", "withtb")
    assert "ended with its task (STOPPED)" in note.data


def test_monitor_magic_returns_the_widget_fed_by_the_daemon(ip: InteractiveShell, daemon: Api) -> None:
    submit(ip, "", v1("mon", "sleep 30"))
    with capture_output():
        monitor = ip.run_line_magic("pai_monitor", "mon --interval 0.2")
    try:
        wait_for(lambda: len(monitor.times) >= 2, 15, "two samples")
        assert len(monitor.times) >= 2 and monitor.cpu.series
        assert monitor.gpu_available is not None
    finally:
        monitor.close()
        daemon.stop(ip.find_line_magic("pai_stop").__self__.last_job)


def test_live_job_list_and_a_local_tensorboard(
    ip: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pai_jupyter.notebook import tensorboard

    submit(ip, "--wait", v1("listed", "true"))
    with capture_output():
        jl = ip.run_line_magic("pai_jobs", "--live --state succeeded")
    try:
        assert list(jl.rows) == [f"{USER}~listed"] and jl.states == ["SUCCEEDED"]
    finally:
        jl.close()
    monkeypatch.setenv("PAI_JUPYTER_BASE_URL", "/user/me/")
    monkeypatch.delenv("TENSORBOARD_PROXY_URL", raising=False)
    logdir = tmp_path / "tb"
    with capture_output():
        shown = ip.run_line_magic("pai_tensorboard", f"--logdir {logdir} --height 300")
    tb = tensorboard.local(logdir)
    try:
        assert tb.reused and f'src="/user/me/proxy/{tb.port}/"' in shown.data and 'height="300"' in shown.data
    finally:
        tb.stop()


def test_notify_asks_for_the_job_status_change_notification(ip: InteractiveShell, daemon: Api) -> None:
    import yaml

    submit(ip, "--notify -o job", v1("told", "true"))
    config = yaml.safe_load(daemon.http.get(f"/api/v2/jobs/{USER}~told/config").text)
    assert config["extras"]["jobStatusChangeNotification"] == {"succeeded": True, "failed": True, "stopped": True}
    cell = (
        "protocolVersion: 2\nname: told2\ntype: job\nprerequisites:\n  - {name: img, type: dockerimage, uri: busybox}\n"
    )
    cell += "taskRoles:\n  main:\n    dockerImage: img\n    commands: ['true']\n"
    cell += "    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}\n"
    cell += "extras:\n  jobStatusChangeNotification: {webhook: 'http://127.0.0.1:9/x'}\n"
    submit(ip, "--notify running,RETRIED", cell)
    config = yaml.safe_load(daemon.http.get(f"/api/v2/jobs/{USER}~told2/config").text)
    assert config["extras"]["jobStatusChangeNotification"] == {
        "webhook": "http://127.0.0.1:9/x",
        "running": True,
        "retried": True,
    }
    with pytest.raises(UsageError, match="sometimes: a notification is one of running"):
        ip.run_cell_magic("pai_submit", "--notify sometimes", v1("never", "true"))
