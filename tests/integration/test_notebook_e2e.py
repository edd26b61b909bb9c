"""End to end: a generated notebook executed by nbclient in a real kernel against a real daemon, and the
widgets driven in-process against the same kind of daemon (form submit, job list actions, log viewer, monitor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from pai_jupyter.client import Client
from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import os_user
from pai_jupyter.notebook import JobForm, JobList, LogViewer, ResourceMonitor
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1
from tests.helpers.notebook import cell_text
from tests.polling import wait_for

USER = os_user()
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def notebook() -> Any:
    ok = v1("nb-ok", "echo {greeting}; echo to-stderr >&2")
    failing = v1("nb-fails", "echo going down; exit 7")
    cells = [
        "%load_ext pai_jupyter",
        'greeting = "hello from the notebook"',
        f"%%pai_submit --wait -o ok\n{ok}",
        "print(ok.state, ok.exit_code)",
        "%pai_logs nb-ok --stream stdout",
        f"%%pai_submit --wait -o bad\n{failing}",
        "print(bad.state, bad.exit_code)",
        "%pai_jobs",
        "from pai_jupyter.notebook import JobForm\nform = JobForm()\nform.name.value = 'from-the-form'\nform",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def test_a_notebook_runs_end_to_end_in_a_real_kernel(daemon: Api, tmp_path: Path) -> None:
    nb = notebook()
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", store_widget_state=True, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # the kernel inherits PAI_JUPYTER_HOME (set by the pai_home fixture): the test's daemon
    out = [cell_text(c) for c in nb.cells]
    assert out[0] == "" and f"{USER}~nb-ok: SUCCEEDED, exit code 0" in out[2]
    assert out[3].strip() == "SUCCEEDED 0"
    assert "hello from the notebook" in out[4] and "to-stderr" not in out[4]
    assert f"{USER}~nb-fails: FAILED, exit code 7" in out[5] and out[6].strip() == "FAILED 7"
    assert "Traceback" not in "".join(out)
    jobs_html = nb.cells[7].outputs[0]["data"]["text/html"]
    assert "nb-ok" in jobs_html and "nb-fails" in jobs_html and "FAILED" in jobs_html
    # the status line was one display, updated in place: a single output left in the cell
    assert [o["output_type"] for o in nb.cells[2].outputs] == ["display_data"]
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    models = {m["model_name"] for m in state.values()}
    assert {"VBoxModel", "TextModel", "TabModel", "DropdownModel"} <= models
    assert any(m["state"].get("value") == "from-the-form" for m in state.values())
    form_view = nb.cells[8].outputs[-1]["data"]["application/vnd.jupyter.widget-view+json"]
    assert state[form_view["model_id"]]["model_name"] == "VBoxModel"
    assert Api.detail(daemon, f"{USER}~nb-fails")["jobStatus"]["appExitCode"] == 7


QUICKSTART = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"


def test_the_quickstart_notebook_is_kept_cleared() -> None:
    nb = nbformat.read(QUICKSTART, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source.strip() == "%load_ext pai_jupyter"
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert "widgets" not in nb.metadata


AFTER_RUN_ALL = """
import time
from pai_jupyter.notebook.tensorboard import has_runs
deadline = time.monotonic() + 240
while monitor._thread.is_alive() and time.monotonic() < deadline:  # it stops on its own when the job ends
    time.sleep(0.5)
print("monitor", "sampling" if monitor._thread.is_alive() else "stopped", monitor.ended, len(monitor.times))
print("busy", client.wait(busy.id, timeout=60).state)
svc = [s for s in client.services(tb.id) if s.name == "tensorboard"][0]
url = f"http://{svc.host}:{svc.port}/"  # the task's TensorBoard wants its service token
while not has_runs(url, token=svc.token) and time.monotonic() < deadline:
    time.sleep(0.5)
print("tensorboard runs", has_runs(url, token=svc.token), svc.logdir)
"""


def test_the_quickstart_runs_headless(daemon: Api) -> None:
    """What a user runs in `make lab` under Run All, in a real kernel (run from notebooks/, as the lab is): every
    section shows its feature working; then, in the same kernel, the monitor stops on its own when its job ends
    and the TensorBoard job's curve reaches its TensorBoard."""
    nb = nbformat.read(QUICKSTART, as_version=4)
    runner = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(QUICKSTART.parent)}},
    )
    with runner.setup_kernel():
        for index, cell in enumerate(nb.cells):
            runner.execute_cell(cell, index)
        check = nbformat.v4.new_code_cell(AFTER_RUN_ALL)
        nb.cells.append(check)
        runner.timeout = 300
        runner.execute_cell(check, len(nb.cells) - 1)
        runner.set_widgets_metadata()
    after = cell_text(nb.cells.pop())
    assert "monitor stopped True" in after, after
    assert int(after.split("monitor stopped True ")[1].split()[0]) >= 5  # it sampled the job while it ran
    assert "busy SUCCEEDED" in after and "tensorboard runs True" in after, after
    code = [c for c in nb.cells if c.cell_type == "code"]
    text = [cell_text(c) for c in code]
    everything = "\n".join(text)
    assert "Traceback" not in everything and "ERROR" not in everything and "pai: " not in everything
    follow = next(t for c, t in zip(code, text, strict=True) if c.source.startswith("%%pai_submit --follow"))
    assert "hello from my notebook" in follow and "I am worker 0 of 2" in follow and "SUCCEEDED, exit code 0" in follow
    logs = next(t for c, t in zip(code, text, strict=True) if c.source.startswith("%pai_logs"))
    assert "I am worker 1 of 2" in logs
    curves_cell = next(c for c in code if "curves.plot" in c.source)
    assert curves_cell.outputs[-1]["data"]["application/vnd.jupyter.widget-view+json"]
    assert any("stopping " in t and "sleeper" in t for t in text)  # the stop section stops its own job only
    states = {m["model_name"] for m in nb.metadata["widgets"][WIDGET_STATE]["state"].values()}
    assert {"FigureModel", "LinesModel", "GridBoxModel", "TabModel"} <= states
    tensorboard = next(c for c in code if c.source.startswith("%pai_tensorboard")).outputs[-1]["data"]["text/html"]
    assert "/tensorboard/" in tensorboard and "TensorBoard watches" in tensorboard
    # the cell kept "no event file yet" for a job that wrote its first one a moment later
    assert "No event file there yet" not in tensorboard, tensorboard


def test_the_form_submits_to_the_real_daemon(daemon: Api) -> None:
    form = JobForm()
    form.name.value = "formjob"
    form.image.value = "busybox"
    form.roles[0].command.value = "echo from the form"
    form.roles[0].memory.value = 256
    assert form.submit() and form.confirm() == f"{USER}~formjob"
    assert daemon.wait(f"{USER}~formjob")["jobStatus"]["state"] == "SUCCEEDED"
    form.name.value = "formjob"  # taken now: the server says so, nothing is half-done
    form.submit()
    assert form.confirm() is None and "not submitted" in form.result.value


def test_the_forms_virtual_cluster_is_a_choice_of_the_daemons_once_shown(pai_home: Path) -> None:
    """Shown, the form asks the profile's cluster (off the kernel's thread) for the user's virtual clusters: a
    select with default picked; the job submitted with the second one lands there. A cluster that does not
    answer leaves the text box, with a note saying why."""
    (pai_home / "local").mkdir(parents=True)
    (pai_home / "local" / "cluster.yaml").write_text("virtualClusters:\n  research: {cpu: 2, memoryMB: 2048}\n")
    daemon = start_daemon(pai_home)
    try:
        form = JobForm()
        assert form.vc.widget is form.vc.text  # nothing asked before it is shown
        form._repr_mimebundle_()
        wait_for(lambda: form.vc.widget is form.vc.select)
        assert form.vc.select.options == ("default", "research") and form.vc.value == "default"
        assert form.vc.note.value == "" and form.vc.text.layout.display == "none"
        form.name.value, form.image.value = "form-vc", "busybox"
        form.roles[0].command.value, form.roles[0].memory.value = "echo picked", 256
        form.vc.value = "research"
        assert form.submit() and form.confirm() == f"{USER}~form-vc"
        listed = daemon.http.get("/api/v2/jobs", params={"vc": "research"}).json()
        assert [j["name"] for j in listed] == ["form-vc"]
        deaf = JobForm(client_factory=lambda profile: Client(url="http://127.0.0.1:9", token="t", username=USER))
        deaf.ask_vcs().join(timeout=60)
        assert deaf.vc.widget is deaf.vc.text and deaf.vc.select.layout.display == "none"
        assert "could not be fetched" in deaf.vc.note.value and "type the name" in deaf.vc.note.value
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)


def test_job_list_log_viewer_and_monitor_against_the_daemon(daemon: Api) -> None:
    daemon.submit_ok(v1("done", "for i in 1 2 3; do echo line $i; done"))
    daemon.wait(f"{USER}~done")
    job = daemon.submit_ok(v1("live", "echo '<b>tag</b>'; sleep 30"))
    with Client() as client:
        jl = JobList(client, interval=0)
        try:
            assert list(jl.rows) == [job, f"{USER}~done"]
            jl.act("detail", f"{USER}~done")
            assert "SUCCEEDED" in jl.panel.children[0].value
            jl.act("logs", f"{USER}~done")
            viewer = jl.panel.children[0]
            assert isinstance(viewer, LogViewer)
            wait_for(lambda: list(viewer.lines)[-3:] == ["line 1", "line 2", "line 3"])
            live = LogViewer(job, client=client, max_lines=10)
            wait_for(lambda: "&lt;b&gt;tag&lt;/b&gt;" in live.view.value)
            monitor = ResourceMonitor(job, client=client, interval=0.2)
            wait_for(lambda: len(monitor.times) >= 3)
            assert monitor.gpu_available is not None and monitor.cpu.series
            jl.act("stop", job)
            assert daemon.wait(job)["jobStatus"]["state"] == "STOPPED"
            wait_for(lambda: "ended" in monitor.status.value or not monitor._thread.is_alive())
            jl.act("clone", f"{USER}~done")
            assert "cloned as" in jl.panel.children[0].value and len(jl.rows) == 3
        finally:
            jl.close()


def test_widgets_import_lazily() -> None:
    """`import pai_jupyter` must not pull in widgets, bqplot or the client (the magics load in <= 0.5 s)."""
    import subprocess
    import sys

    code = (
        "import sys, pai_jupyter; from IPython.core.interactiveshell import InteractiveShell; "
        "pai_jupyter.load_ipython_extension(InteractiveShell.instance()); "
        "print(sorted(m for m in ('ipywidgets', 'bqplot', 'httpx', 'pandas', 'pai_jupyter.client') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
