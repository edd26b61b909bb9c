"""On the real two-node Slurm cluster: a ps x1 + worker x2 job across both nodes whose workers
reach ps through PAI_HOST_IP_*/PAI_PORT_LIST_*, and whose TensorBoard (on ps's node, not this host's loopback)
opens through the Jupyter server extension; a notebook's ``%%pai_submit --wait`` and the Lab's sidebar and job page
work against it unchanged."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from pai_jupyter.notebook.magics import PaiMagics
from tests.helpers.browser import open_lab_page
from tests.helpers.daemon import Api, v1
from tests.helpers.jupyter_fixture import jupyter, start_jupyter, write_events
from tests.helpers.slurm_jobs import PS, WORKER, job, role

from ..polling import wait_for
from ..slurm.fixture import node_addrs

pytestmark = [pytest.mark.slurm]


def _node_ips() -> set[str]:
    """The nodes' own IPs on the cluster's bridge (not this host's loopback)."""
    ips = set(node_addrs().values())
    assert ips and "127.0.0.1" not in ips, ips
    return ips


def test_a_distributed_jobs_tensorboard_on_a_slurm_node_opens_through_the_server_extension(
    slurm: Api, tmp_path: Path
) -> None:
    logdir = write_events(tmp_path / "tb")
    roles = {
        "ps": role('python3 -c "$ps_code"; sleep 300', ports=1),
        "worker": role('python3 -c "$worker_code"', instances=2, ports=1),
    }
    plugins = [{"plugin": "tensorboard", "parameters": {"logdir": str(logdir)}}]  # ps[0]: the first role's
    extras = {"com.microsoft.pai.runtimeplugin": plugins}
    name = slurm.submit_ok(job("tbdist", roles, parameters={"ps_code": PS, "worker_code": WORKER}, extras=extras))
    with jupyter(tmp_path / "jupyter", slurm.home) as server:
        wait_for(lambda: slurm.log(name, role="ps", name="stdout").count("ps got worker") == 2, 120, "ps to meet both")
        detail = slurm.detail(name)
        ps = slurm.tasks(detail, "ps")[0]
        workers = slurm.tasks(detail, "worker")
        assert {ps["containerIp"], *(w["containerIp"] for w in workers)} <= _node_ips(), detail
        assert len({ps["containerNodeName"], *(w["containerNodeName"] for w in workers)}) == 2, detail
        http = server.http()
        runs = f"pai/jobs/{name}/ps/0/tensorboard/data/runs"

        def listed() -> bool:
            r = http.get(runs)
            return r.status_code == 200 and "run_a" in r.text

        wait_for(listed, 120, lambda: f"TensorBoard through the proxy: {http.get(runs).text[:300]}")
        page = http.get(f"pai/jobs/{name}/ps/0/tensorboard/")
        assert page.status_code == 200 and "tensorboard" in page.text.lower(), page.text[:300]
        service = next(s for s in slurm.http.get(f"/api/v2/local/jobs/{name}/services").json() if s["role"] == "ps")
        assert service["host"] == ps["containerIp"], service  # the proxy went to ps's node
    slurm.stop(name)
    detail = slurm.wait(name, timeout=60)
    assert [w["taskState"] for w in slurm.tasks(detail, "worker")] == ["SUCCEEDED", "SUCCEEDED"], detail


def test_a_notebooks_pai_submit_wait_works_unchanged_against_slurm(slurm: Api) -> None:
    shell = InteractiveShell.instance()
    magics = PaiMagics(shell)
    shell.register_magics(magics)
    try:
        with capture_output() as c:
            shell.run_cell_magic("pai_submit", "--wait -o job", v1("nbslurm", 'echo "on $SLURMD_NODENAME"; exit 7'))
        lines = [o.data.get("text/plain", "") for o in c.outputs]
        job = shell.user_ns["job"]
        assert lines[-1].startswith(f"{job.id}: FAILED, exit code 7"), lines
        assert job.state == "FAILED" and job.exit_code == 7
        assert slurm.log(job.id, name="stdout").startswith("on n")  # it ran on a Slurm node
    finally:
        magics.close()


@pytest.mark.browser
def test_the_labs_sidebar_and_job_page_show_a_slurm_job_on_its_node(
    slurm: Api, browser: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    name = slurm.submit_ok(job("labslurm", {"main": role('echo "on $SLURMD_NODENAME"; sleep 300')}))
    ip = wait_for(lambda: slurm.tasks(slurm.detail(name), "main")[0].get("containerIp"), 60, "the task's node IP")
    assert ip in _node_ips()
    server = start_jupyter(tmp_path / "jupyter", slurm.home, lab=True, lab_settings={"refreshSeconds": 1})
    try:
        with contextmanager(open_lab_page)(browser, server, request) as page:
            row = page.locator("#pai-jobs-panel .pai-JobRow").filter(
                has=page.locator(".pai-JobRow-name", has_text="labslurm")
            )
            row.locator(".pai-Badge", has_text="RUNNING").wait_for(timeout=60_000)
            row.click()
            job_page = page.locator(".pai-JobPage").filter(has_text=name)
            job_page.locator(".pai-Tasks td", has_text=ip).first.wait_for(timeout=30_000)  # the node it runs on
            job_page.locator(".pai-LogText", has_text="on n").wait_for(timeout=30_000)  # its log, from the node
            slurm.stop(name)
            row.locator(".pai-Badge", has_text="STOPPED").wait_for(timeout=60_000)
    finally:
        server.stop()
