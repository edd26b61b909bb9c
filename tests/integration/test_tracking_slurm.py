"""Every job an MLflow run on the Slurm backend (docs/tracking.md): the cluster's MLflow server listens where the
nodes reach this host, and the tasks of one job, on both nodes of the test cluster, log into the job's one run."""

from __future__ import annotations

import json
import shlex
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import local_dir
from pai_jupyter.cluster.tracking.tracker import user_password
from tests.helpers.daemon import Api, remove_accounts
from tests.helpers.mlflow_jobs import PYTHON, job_of, start_tracked
from tests.polling import wait_for

from ..slurm.fixture import node_addrs

pytestmark = pytest.mark.slow


@pytest.fixture
def tracked(slurm_cluster: str, pai_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Api, str]]:
    """A daemon on the Slurm runtime that tracks jobs, and its MLflow server's URL once it answers."""
    yield start_tracked(pai_home, "slurm", monkeypatch)
    control.stop(pai_home)
    remove_accounts(pai_home)


def test_the_tasks_of_a_job_on_both_nodes_log_into_its_one_run(
    tracked: tuple[Api, str], pai_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, url = tracked
    assert "127.0.0.1" not in url and "localhost" not in url, url  # where the nodes reach this host
    rec = json.loads((local_dir(pai_home) / "mlflow-server.json").read_text())
    tree = [psutil.Process(rec["pid"]), *psutil.Process(rec["pid"]).children(recursive=True)]
    listening = {c.laddr.ip for p in tree for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    assert listening == {rec["host"]} and rec["host"] in url, (listening, rec)  # that address only, not all
    alice = api.new_user("alice")
    script = textwrap.dedent("""
        import os, mlflow
        node = os.environ["SLURMD_NODENAME"]
        print("RUN", os.environ["PAI_MLFLOW_RUN_ID"], node, flush=True)
        mlflow.log_metric(f"from_{node}", 1.0)
    """)
    # a node each (2 CPUs per node)
    doc = job_of("both-nodes", f"{PYTHON} -c {shlex.quote(script)}", instances=2, cpu=2)
    alice.submit_ok(doc)
    done = alice.wait("alice~both-nodes", timeout=240)
    assert done["jobStatus"]["state"] == "SUCCEEDED", done["jobStatus"]
    lines = [alice.log("alice~both-nodes", index=i, name="stdout").split() for i in (0, 1)]
    nodes = {line[2] for line in lines}
    assert nodes == set(node_addrs()) and len({line[1] for line in lines}) == 1, lines
    run_id = lines[0][1]
    secret = json.loads((local_dir(pai_home) / "mlflow-secrets.json").read_text())["users_key"].encode()
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")  # (MLflow's client reads them at each call)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", user_password(secret, "alice"))
    client = MlflowClient(tracking_uri=url)

    def ended() -> object:
        run = client.get_run(run_id)
        done = run.data.tags.get("pai.state") == "SUCCEEDED" and run.info.status == "FINISHED"
        return run if done else None  # (the platform's end: MLflow's client in a task ends it FINISHED at exit)

    run = wait_for(ended, 60, "the run FINISHED")
    assert {f"from_{n}" for n in nodes} <= set(run.data.metrics), run.data.metrics
    assert run.data.tags["pai.job"] == "alice~both-nodes" and run.data.tags["pai.exitCode"] == "0"
