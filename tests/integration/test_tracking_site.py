"""Jobs as runs on a site's own MLflow server (``--mlflow-uri``, cluster/tracking/site.py): a real MLflow server
with its basic-auth app stands for the site's, with an account of the site's own called like a platform user."""

from __future__ import annotations

import configparser
import json
import os
import secrets
import shlex
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import local_dir
from pai_jupyter.cluster.tracking.tracker import user_password
from pai_jupyter.common.home import read_runtime
from pai_jupyter.common.localserver import free_port
from tests.helpers.daemon import Api, kill_leftovers, start_daemon
from tests.helpers.mlflow_jobs import PYTHON, TASK_TOOLS, answers, job_of
from tests.polling import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, tuple[str, str]]]:
    """The site's MLflow server (its URL and its admin's credentials), no account of ours in it yet."""
    if not Path(TASK_TOOLS, "bin", "mlflow").exists():
        pytest.skip(f"no mlflow in the task tools at {TASK_TOOLS} (.ci/run installs it there)")
    d = tmp_path_factory.mktemp("site-mlflow")
    admin = ("site-admin", secrets.token_urlsafe(16))
    ini = configparser.ConfigParser()
    ini["mlflow"] = {
        "default_permission": "NO_PERMISSIONS",
        "database_uri": f"sqlite:///{d / 'auth.db'}",
        "admin_username": admin[0],
        "admin_password": admin[1],
        "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
    }
    with open(d / "auth.ini", "w") as f:
        ini.write(f)
    port = free_port()
    env = {
        **os.environ,
        "MLFLOW_AUTH_CONFIG_PATH": str(d / "auth.ini"),
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
    }
    argv = [f"{TASK_TOOLS}/bin/python3", "-m", "mlflow", "server", "--app-name", "basic-auth"]
    argv += ["--backend-store-uri", f"sqlite:///{d / 'mlflow.db'}", "--artifacts-destination", str(d / "artifacts")]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with open(d / "log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log, env=env, cwd=d, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(url), 180, "the site's MLflow server answering")
        yield url, admin
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def test_jobs_are_runs_on_the_sites_server_with_accounts_of_their_own(
    site: tuple[str, tuple[str, str]], tmp_path: Path
) -> None:
    """The daemon makes Alice an account ``pai-alice`` on the site's server (the site's own ``alice`` keeps her
    password), her job is a run there that its unchanged code logs into, and the credentials file must be private."""
    url, admin = site
    with httpx.Client(base_url=url, auth=admin, timeout=30) as http:  # the site's own alice
        made = http.post("/api/2.0/mlflow/users/create", json={"username": "alice", "password": "sites-own-pass1"})
        assert made.is_success, made.text
    credentials = tmp_path / "mlflow-admin.json"
    credentials.write_text(json.dumps({"username": admin[0], "password": admin[1]}))
    credentials.chmod(0o644)
    home = tmp_path / "home"
    flags = ["--mlflow", "on", "--mlflow-uri", url, "--mlflow-credentials", str(credentials)]
    with pytest.raises(control.DaemonError) as refused:  # readable by others: refused, saying why
        start_daemon(home, extra_args=flags)
    assert "chmod 600" in str(refused.value)
    credentials.chmod(0o600)
    api: Api = start_daemon(home, extra_args=flags)
    try:
        info = read_runtime(home)
        assert info is not None and info["mlflow"] == url
        alice = api.new_user("alice")
        script = textwrap.dedent("""
            import os, mlflow
            print("RUN", os.environ["PAI_MLFLOW_RUN_ID"], os.environ["MLFLOW_TRACKING_USERNAME"], flush=True)
            mlflow.log_metric("loss", 0.5)
        """)
        doc = job_of("on-site", f"{PYTHON} -c {shlex.quote(script)}")
        alice.submit_ok(doc)
        assert alice.wait("alice~on-site", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
        out = alice.log("alice~on-site", name="stdout")
        _, run_id, account = next(line for line in out.splitlines() if line.startswith("RUN ")).split()
        assert account == "pai-alice"
        key = json.loads((local_dir(home) / "mlflow-secrets.json").read_text())["users_key"].encode()
        with httpx.Client(base_url=url, auth=("pai-alice", user_password(key, "pai-alice")), timeout=30) as mine:

            def finished() -> dict[str, object] | None:
                run = mine.get("/api/2.0/mlflow/runs/get", params={"run_id": run_id}).json()["run"]
                return run if run["info"]["status"] == "FINISHED" else None

            run = wait_for(finished, 120, "the run FINISHED on the site's server")
            assert {m["key"]: m["value"] for m in run["data"]["metrics"]}["loss"] == 0.5
            experiment = mine.get(
                "/api/2.0/mlflow/experiments/get", params={"experiment_id": run["info"]["experiment_id"]}
            )
            assert experiment.json()["experiment"]["name"] == "pai/alice"
        with httpx.Client(base_url=url, auth=("alice", "sites-own-pass1"), timeout=30) as sites_alice:
            assert sites_alice.get("/api/2.0/mlflow/users/get", params={"username": "alice"}).status_code == 200
            assert sites_alice.get("/api/2.0/mlflow/runs/get", params={"run_id": run_id}).status_code == 403
    finally:
        control.stop(home)
        kill_leftovers(home)
