"""Every job an MLflow run (cluster/tracking/, docs/tracking.md), against the real thing: the daemon starts its own
MLflow server (basic-auth app, SQLite), a job's unchanged code logs with the real ``mlflow`` client into the run the
platform made, and another user's credentials are refused by MLflow itself."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import psutil
import pytest
import yaml
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from pai_jupyter.client.profiles import Profile, upsert_profile
from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import local_dir
from pai_jupyter.cluster.tracking.server import ADMIN
from pai_jupyter.cluster.tracking.tracker import user_password
from pai_jupyter.common.home import read_runtime
from pai_jupyter.common.localserver import ephemeral_span
from pai_jupyter.sweep import Sweep
from tests.helpers.browser import open_lab_page, run_from_palette
from tests.helpers.daemon import Api, kill_leftovers, start_daemon
from tests.helpers.jupyter_fixture import JupyterServer, start_jupyter, write_notebook
from tests.helpers.mlflow_jobs import PYTHON, TASK_TOOLS, answers, job, job_of
from tests.polling import wait_for

pytestmark = pytest.mark.slow


@dataclass
class Env:
    home: Path
    api: Api
    alice: Api
    bob: Api
    url: str


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    if not Path(TASK_TOOLS, "bin", "mlflow").exists():
        pytest.skip(f"no mlflow in the task tools at {TASK_TOOLS} (.ci/run installs it there)")
    home = tmp_path_factory.mktemp("tracking") / "pai-home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAI_JUPYTER_TASK_TOOLS", TASK_TOOLS)  # the daemon's: its MLflow server runs from there
        mp.setenv("PAI_JUPYTER_MLFLOW_SYSTEM_SECONDS", "1")  # (10 by default: a test job is over sooner)
        api = start_daemon(home, extra_args=["--mlflow", "on"])
        info = read_runtime(home)
        assert info is not None and info.get("mlflow"), info
        wait_for(lambda: answers(str(info["mlflow"])), 180, "the MLflow server answering (its first start)")
        yield Env(home, api, api.new_user("alice"), api.new_user("bob"), str(info["mlflow"]))
        control.stop(home)
        kill_leftovers(home)


def secrets_of(home: Path) -> dict[str, str]:
    return dict(json.loads((local_dir(home) / "mlflow-secrets.json").read_text()))


class UserClient:
    """An MLflow client that calls with one user's credentials (those the daemon gives the user's tasks); MLflow's
    client reads them from the environment at each call, so each call sets them."""

    def __init__(self, url: str, user: str, password: str) -> None:
        self.client, self.user, self.password = MlflowClient(tracking_uri=url), user, password

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = self.user, self.password
            return method(*args, **kwargs)

        return call


def client_as(env: Env, user: str) -> UserClient:
    return UserClient(env.url, user, user_password(secrets_of(env.home)["users_key"].encode(), user))


def admin_http(env: Env) -> httpx.Client:
    return httpx.Client(base_url=env.url, auth=(ADMIN, secrets_of(env.home)["admin_password"]), timeout=30)


def run_of(env: Env, user: str, name: str) -> str:
    """The job's run id, as its task saw it (the job prints MLFLOW_RUN_ID first)."""
    out = env.api.log(f"{user}~{name}", name="stdout")
    for line in out.splitlines():
        if line.startswith("RUN "):
            return line.split()[1]
    raise AssertionError(f"no RUN line in {user}~{name}'s output: {out[-500:]}")


END_STATUS = {"SUCCEEDED": "FINISHED", "FAILED": "FAILED", "STOPPED": "KILLED"}


def platform_end(client: Any, run_id: str, state: str = "SUCCEEDED", timeout: float = 60) -> Any:
    """The run once the platform wrote the job's end ``state`` (its tags, then its status). MLflow's own client in
    the task may end the run FINISHED at the task's exit, before the daemon's update: its status alone says little."""

    def ended() -> Any:
        run = client.get_run(run_id)
        return run if run.data.tags.get("pai.state") == state and run.info.status == END_STATUS[state] else None

    return wait_for(ended, timeout, f"the platform's end ({state}) of run {run_id}")


def test_a_job_is_a_run_its_unchanged_code_logs_into(env: Env) -> None:
    """The platform made the run (tags, params, SCHEDULED -> RUNNING -> FINISHED); the job's own code, which
    names no server, run or experiment, logged into it with the real client, and report() did too."""
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
        import mlflow
        mlflow.log_param("lr", 0.1)
        for step, loss in enumerate([0.5, 0.25, 0.125]):
            mlflow.log_metric("loss", loss, step=step)
        from pai_jupyter import report
        report(step=7, accuracy=0.9)
    """
    name = env.alice.submit_ok(job("fit", script, {"epochs": 3, "batch": "32"})).split("~")[1]
    done = env.alice.wait(f"alice~{name}", timeout=180)
    assert done["jobStatus"]["state"] == "SUCCEEDED", done["jobStatus"]
    run_id = run_of(env, "alice", name)
    client = client_as(env, "alice")

    run = platform_end(client, run_id)
    run = wait_for(lambda: (r := client.get_run(run_id)).data.metrics.get("accuracy") and r, 30, "the report's metric")
    assert client.get_experiment(run.info.experiment_id).name == "pai/alice"
    tags = run.data.tags
    assert tags["pai.user"] == "alice" and tags["pai.job"] == "alice~fit" and tags["mlflow.user"] == "alice"
    assert tags["pai.state"] == "SUCCEEDED" and tags["pai.exitCode"] == "0" and tags["pai.virtualCluster"]
    assert run.info.run_name == "fit"
    assert run.data.params == {"epochs": "3", "batch": "32", "lr": "0.1"}
    history = client.get_metric_history(run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 0.5), (1, 0.25), (2, 0.125)]
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "accuracy")] == [(7, 0.9)]


def test_a_failed_job_ends_its_run_failed_with_its_exit_code(env: Env) -> None:
    script = """
        import os, sys
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
        sys.exit(3)
    """
    env.alice.submit_ok(job("fails", script))
    assert env.alice.wait("alice~fails", timeout=120)["jobStatus"]["state"] == "FAILED"
    client = client_as(env, "alice")
    run_id = run_of(env, "alice", "fails")
    run = platform_end(client, run_id, "FAILED")
    assert run.data.tags["pai.exitCode"] == "3" and run.data.tags["pai.state"] == "FAILED"
    assert run.info.end_time is not None


def test_another_user_can_neither_read_nor_write_a_run(env: Env) -> None:
    """Bob holds his own MLflow credentials (his tasks get them): with them, and from a task of his that names
    Alice's run, MLflow refuses every read and write of her run and her experiment; without any, the server and
    its UI answer 401."""
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
    """
    env.alice.submit_ok(job("private", script))
    assert env.alice.wait("alice~private", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    run_id = run_of(env, "alice", "private")
    # from a task of Bob's that names Alice's run (its own MLFLOW_* credentials are Bob's)
    attack = f"""
        import mlflow
        try:
            mlflow.MlflowClient().log_metric("{run_id}", "planted", 1.0)
            print("PLANTED")
        except Exception as exc:
            print("REFUSED", type(exc).__name__, str(exc)[:200])
    """
    env.bob.submit_ok(job("attack", attack))
    env.bob.wait("bob~attack", timeout=120)
    out = env.api.log("bob~attack", name="stdout")
    assert "REFUSED" in out and "PLANTED" not in out, out[-500:]
    alice = client_as(env, "alice")
    experiment = alice.get_run(run_id).info.experiment_id
    bob = client_as(env, "bob")
    for attempt in (
        lambda: bob.get_run(run_id),
        lambda: bob.log_metric(run_id, "planted", 1.0),
        lambda: bob.set_tag(run_id, "planted", "yes"),
        lambda: bob.get_experiment(experiment),
        lambda: bob.delete_run(run_id),
    ):
        with pytest.raises(MlflowException) as refused:
            attempt()
        assert "PERMISSION_DENIED" in str(refused.value) or "403" in str(refused.value), refused.value
    assert bob.search_runs([experiment]) == []
    assert "planted" not in alice.get_run(run_id).data.metrics and "planted" not in alice.get_run(run_id).data.tags
    for path in ("/", "/api/2.0/mlflow/experiments/search", "/ajax-api/2.0/mlflow/runs/get"):
        assert httpx.get(env.url + path, params={"run_id": run_id}).status_code == 401, path


def test_the_server_is_loopback_only_and_not_root(env: Env) -> None:
    """The server listens on loopback only, and where the daemon is root it is not: its own account runs it."""
    rec = json.loads((local_dir(env.home) / "mlflow-server.json").read_text())
    tree = [psutil.Process(rec["pid"]), *psutil.Process(rec["pid"]).children(recursive=True)]
    listening = {c.laddr.ip for p in tree for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    assert listening == {"127.0.0.1"}, listening
    if os.geteuid() == 0:
        assert all(p.uids().effective != 0 for p in tree), [(p.pid, p.uids()) for p in tree]
    with admin_http(env) as http:  # the admin account is the daemon's alone: its password is in root's file
        assert http.get("/api/2.0/mlflow/users/get", params={"username": "alice"}).status_code == 200


def kill_and_restart(env: Env) -> None:
    """The daemon killed with -9 and started again on the same home (its MLflow server left running)."""
    before = read_runtime(env.home)
    assert before is not None
    os.kill(int(before["pid"]), signal.SIGKILL)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAI_JUPYTER_TASK_TOOLS", TASK_TOOLS)
        api = start_daemon(env.home, extra_args=["--mlflow", "on"])
    env.api, env.alice, env.bob = api, api.as_user(env.alice.token), api.as_user(env.bob.token)


def test_a_daemon_killed_and_started_again_takes_the_running_server_over(env: Env) -> None:
    """Tasks keep logging while the daemon restarts: the server outlives a daemon killed with -9, and the next
    daemon uses that one (same process, same address) and makes runs there."""
    before = read_runtime(env.home)
    assert before is not None
    server_pid = json.loads((local_dir(env.home) / "mlflow-server.json").read_text())["pid"]
    kill_and_restart(env)
    after = read_runtime(env.home)
    assert after is not None and after["mlflow"] == before["mlflow"]
    assert json.loads((local_dir(env.home) / "mlflow-server.json").read_text())["pid"] == server_pid
    alice = env.alice
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
    """
    alice.submit_ok(job("after-restart", script))
    assert alice.wait("alice~after-restart", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    client = client_as(env, "alice")
    run_id = run_of(env, "alice", "after-restart")
    platform_end(client, run_id)


def test_a_user_gets_their_own_tracking_and_sees_only_their_runs_with_it(env: Env) -> None:
    """``GET /api/v2/local/tracking`` (``pai mlflow env``) gives the caller their own credentials: with Alice's,
    MLflow lists her experiment's runs; with Bob's, his experiment and none of hers."""
    mine = env.alice.http.get("/api/v2/local/tracking")
    assert mine.status_code == 200 and mine.headers["Cache-Control"] == "no-store"
    alice = mine.json()
    assert alice["username"] == "alice" and alice["experiment"] == "pai/alice" and alice["url"] == env.url
    theirs = env.bob.http.get("/api/v2/local/tracking").json()
    assert theirs["username"] == "bob" and theirs["password"] != alice["password"]
    as_alice = UserClient(env.url, alice["username"], alice["password"])
    names = {r.info.run_name for r in as_alice.search_runs([alice["experimentId"]])}
    assert {"fit", "fails", "private"} <= names, names
    as_bob = UserClient(env.url, theirs["username"], theirs["password"])
    assert as_bob.get_experiment_by_name("pai/bob") is not None
    assert [e.name for e in as_bob.search_experiments()] == ["pai/bob"]


def test_a_new_users_first_jobs_submitted_together_are_all_runs(env: Env) -> None:
    """A sweep's first trials come at once: the user's MLflow account and experiment are made once, and every job
    has its run (no ``NotTracked`` event)."""
    carol = env.api.new_user("carol")
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
    """
    with ThreadPoolExecutor(4) as pool:
        jobs = list(pool.map(lambda i: carol.submit_ok(job(f"trial-{i}", script, {"i": i})), range(4)))
    for name in jobs:
        assert carol.wait(name, timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
        events = carol.http.get(f"/api/v2/jobs/{name}/events").json()["data"]
        assert {e["reason"] for e in events} >= {"Submitted"} and "NotTracked" not in {e["reason"] for e in events}
    client = client_as(env, "carol")
    experiment = client.get_experiment_by_name("pai/carol")
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in runs) == [f"trial-{i}" for i in range(4)]
    assert {r.data.params["i"] for r in runs} == {"0", "1", "2", "3"}


def test_a_user_who_deleted_their_experiment_gets_it_back_with_their_next_run(env: Env) -> None:
    alice = client_as(env, "alice")
    experiment = alice.get_experiment_by_name("pai/alice")
    alice.delete_experiment(experiment.experiment_id)
    assert alice.get_experiment(experiment.experiment_id).lifecycle_stage == "deleted"
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
    """
    env.alice.submit_ok(job("after-delete", script))
    assert env.alice.wait("alice~after-delete", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    run = alice.get_run(run_of(env, "alice", "after-delete"))
    assert run.info.experiment_id == experiment.experiment_id
    assert alice.get_experiment(experiment.experiment_id).lifecycle_stage == "active"


def server_said(env: Env) -> str:
    """Where the daemon last started the server, and what the daemon and the server logged about it."""
    local = local_dir(env.home)
    daemon = [line for line in (local / "daemon.log").read_text().splitlines() if "MLflow" in line]
    server = (local / "mlflow-server.log").read_text().splitlines()
    return "\n".join([(local / "mlflow-server.json").read_text(), *daemon[-8:], "--- server log:", *server[-15:]])


def test_a_job_submitted_while_the_server_is_down_runs_untracked_and_the_server_comes_back(env: Env) -> None:
    """The MLflow server killed: a job submitted then still runs, with a ``NotTracked`` event that says why, and
    the daemon starts the server again at the same address, where the next job is a run. That address lasts: it is
    outside this host's ephemeral ports, which any other program may take while the server is down."""
    record = local_dir(env.home) / "mlflow-server.json"
    before = json.loads(record.read_text())
    low, high = ephemeral_span()
    assert not low <= before["port"] <= high and f":{before['port']}" in env.url, before
    os.killpg(before["pid"], signal.SIGKILL)
    wait_for(lambda: not answers(env.url), 30, "the server gone")
    script = """
        import os
        print("TRACKING", os.environ.get("MLFLOW_RUN_ID", "none"), flush=True)
    """
    env.alice.submit_ok(job("while-down", script))
    assert env.alice.wait("alice~while-down", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    assert "TRACKING none" in env.api.log("alice~while-down", name="stdout")
    events = env.alice.http.get("/api/v2/jobs/alice~while-down/events").json()["data"]
    said = [e["message"] for e in events if e["reason"] == "NotTracked"]
    assert said and "MLflow" in said[0], events
    wait_for(lambda: answers(env.url), 180, lambda: f"the server started again at {env.url}: {server_said(env)}")
    assert json.loads(record.read_text())["pid"] != before["pid"]
    env.alice.submit_ok(job("back-up", "import os\nprint('RUN', os.environ['MLFLOW_RUN_ID'], flush=True)"))
    assert env.alice.wait("alice~back-up", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    client = client_as(env, "alice")
    run_id = run_of(env, "alice", "back-up")
    platform_end(client, run_id)


TRIAL = Path(__file__).resolve().parents[2] / "notebooks" / "scripts" / "sweep_trial.py"  # reports its loss


def test_a_sweep_is_a_parent_run_whose_best_child_is_the_sweeps_best_trial(env: Env, tmp_path: Path) -> None:
    """A 10-trial Optuna sweep driven as Alice: each trial is a run (its parameters as params, its reported loss
    curve, its trial number), all children of the sweep's own run (the search as params, Optuna's study as tags),
    which is FINISHED once the sweep is done with the best objective; MLflow's best by loss is ``Sweep.best()``."""
    command = f"{PYTHON} {TRIAL} --x <% $parameters.x %> --lr <% $parameters.lr %> --steps 3"
    template = job_of("trial", command)
    home = tmp_path / "alice-home"
    upsert_profile(Profile(name="alice", url=env.api.url, username="alice", token=env.alice.token), home)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAI_JUPYTER_HOME", str(home))
        space = {"x": [round(0.1 * i, 1) for i in range(10)], "lr": [0.01]}
        sweep = Sweep(
            "study", template, space, search="optuna", max_trials=10, concurrency=4, profile="alice", poll=0.05
        )
        sweep.run(timeout=240)
    best = sweep.best()
    assert sweep.status == "done" and best is not None
    client = client_as(env, "alice")
    experiment = client.get_experiment_by_name("pai/alice").experiment_id

    def parent_done() -> Any:
        found = [r for r in client.search_runs([experiment]) if r.info.run_name == "study"]
        return found[0] if found and found[0].info.status == "FINISHED" else None

    parent = wait_for(parent_done, 60, "the sweep's run FINISHED")
    assert parent.data.tags["pai.sweep"] == "alice~study"
    children = client.search_runs(
        [experiment], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'", order_by=["metrics.loss ASC"]
    )
    assert sorted(r.info.run_name for r in children) == [f"study-{i:04d}" for i in range(10)]
    succeeded = f"tags.`mlflow.parentRunId` = '{parent.info.run_id}' and tags.`pai.state` = 'SUCCEEDED'"
    top = client.search_runs([experiment], filter_string=succeeded, order_by=["metrics.loss ASC"], max_results=1)[0]
    # (a pruned trial was stopped: not SUCCEEDED; TPE may try one x twice: the best may be a tie of equal trials)
    assert top.data.metrics["loss"] == pytest.approx(best["value"])
    assert top.data.params["x"] == str(best["params"]["x"])
    assert [m.step for m in client.get_metric_history(top.info.run_id, "loss")] == [0, 1, 2]
    assert sorted(int(r.data.tags["pai.trial"]) for r in children) == list(range(10))
    params = parent.data.params
    assert params["search"] == "optuna" and params["objective"] == "loss" and params["max_trials"] == "10"
    assert json.loads(params["space.x"])["values"] == space["x"], params
    assert parent.data.tags["pai.optuna.sampler"].startswith("TPESampler(seed=0")
    assert parent.data.tags["pai.optuna.direction"] == "minimize"
    assert parent.data.tags["pai.sweep.best"] == best["job"]
    assert parent.data.metrics["best_loss"] == pytest.approx(best["value"])


@pytest.fixture(scope="module")
def alice_home(env: Env, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PAI_JUPYTER_HOME whose profile ``alice`` is Alice's on the test's cluster."""
    home = tmp_path_factory.mktemp("alice") / "pai-home"
    upsert_profile(Profile(name="alice", url=env.api.url, username="alice", token=env.alice.token), home)
    return home


@pytest.fixture(scope="module")
def alice_lab(alice_home: Path) -> Iterator[JupyterServer]:
    """Alice's Jupyter server (JupyterLab's pages on) with the extension, on her own profile."""
    server = start_jupyter(alice_home.parent / "jupyter", alice_home, {"profile": "alice"}, lab=True)
    yield server
    server.stop()


@pytest.fixture
def alice_page(alice_lab: JupyterServer, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from open_lab_page(browser, alice_lab, request)


def test_the_mlflow_ui_opens_through_the_extension_sandboxed_with_the_users_own_runs(
    env: Env, alice_lab: JupyterServer
) -> None:
    """``pai/mlflow/``: a navigation signed in to Jupyter goes to the UI under a capability; served sandboxed, with
    MLflow's own page; its API calls carry Alice's credentials (added by the extension, never the browser's) and
    answer her runs, not Bob's; without the login or the capability nothing is served; the job page links the run."""
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
    """
    for user, api, name in (
        ("alice", env.alice, "ui-run"),
        ("alice", env.alice, "ui-run-2"),
        ("bob", env.bob, "ui-run"),
    ):
        api.submit_ok(job(name, script))
        assert api.wait(f"{user}~{name}", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    alices, bobs = run_of(env, "alice", "ui-run"), run_of(env, "bob", "ui-run")
    http = alice_lab.http()
    detail = http.get("pai/api/jobs/alice~ui-run").json()
    experiment = client_as(env, "alice").get_run(alices).info.experiment_id
    assert detail["mlflowPage"].endswith(f"/pai/mlflow/#/experiments/{experiment}/runs/{alices}"), detail
    nav = {"Sec-Fetch-Mode": "navigate", "Accept": "text/html"}
    to_cap = http.get("pai/mlflow/", headers=nav)
    assert to_cap.status_code == 302, to_cap.text[:300]
    page_url = to_cap.headers["Location"]
    assert "/pai/mlflow/~" in page_url
    anonymous = httpx.Client(base_url=alice_lab.url, timeout=60)  # the sandboxed page's own requests: no login
    page = anonymous.get(page_url)
    assert page.status_code == 200 and "<title>MLflow</title>" in page.text, page.text[:300]
    assert page.headers["Content-Security-Policy"].startswith("sandbox") and "~pai-sandbox.js" in page.text
    path = urlsplit(page_url).path.rstrip("/") + "/ajax-api/2.0/mlflow/runs/search"
    found = anonymous.post(path, json={"experiment_ids": [experiment]})
    assert found.status_code == 200, found.text[:300]
    assert alices in {r["info"]["run_id"] for r in found.json().get("runs", [])}
    bob_experiment = client_as(env, "bob").get_run(bobs).info.experiment_id
    theirs = anonymous.post(path, json={"experiment_ids": [bob_experiment]})  # MLflow filters what it may not show
    assert theirs.status_code == 200 and not theirs.json().get("runs"), theirs.text[:300]
    get_run = path.replace("runs/search", "runs/get")
    assert anonymous.get(get_run, params={"run_id": bobs}).status_code == 403
    assert anonymous.get(get_run, params={"run_id": alices}).status_code == 200
    forged = re.sub(r"\.[0-9a-f]{32}/", "." + "0" * 32 + "/", urlsplit(page_url).path)
    assert forged != urlsplit(page_url).path and anonymous.get(forged).status_code == 403
    bare = urlsplit(alice_lab.url).path + "pai/mlflow/ajax-api/2.0/mlflow/experiments/search"
    assert anonymous.get(bare).status_code in (302, 403)  # not signed in: Jupyter's login, never MLflow
    compared = http.get("pai/api/mlflow/compare", params=[("job", "alice~ui-run"), ("job", "alice~ui-run-2")])
    assert compared.status_code == 200, compared.text
    assert "compare-runs?runs=" in compared.json()["url"] and alices in unquote(compared.json()["url"])
    assert http.get("pai/api/mlflow/compare", params=[("job", "bob~ui-run")]).status_code == 404


def test_the_lab_opens_a_jobs_run_and_compares_a_sweeps_trials_in_its_mlflow_tab(
    env: Env, alice_home: Path, alice_page: Any
) -> None:
    """In Alice's Lab: the Sweeps page's "Compare in MLflow" opens MLflow's compare view of the sweep's two trials
    in the MLflow tab; a trial's job page's "MLflow run" opens that run's page there."""
    template = job_of("pair", f"{PYTHON} {TRIAL} --x <% $parameters.x %> --lr <% $parameters.lr %> --steps 2")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PAI_JUPYTER_HOME", str(alice_home))
        sweep = Sweep("pair", template, {"x": [0.1, 0.7], "lr": [0.01]}, profile="alice", poll=0.05)
        sweep.run(timeout=240)
    assert sweep.status == "done"
    page = alice_page
    run_from_palette(page, "PAI sweeps", ".pai-SweepsView")
    view = page.locator(".pai-SweepsView")
    view.locator(".pai-SweepName", has_text="pair").first.click()
    view.locator(".pai-TrialRow").nth(1).wait_for(state="visible", timeout=30_000)
    view.locator(".pai-CompareTrials").click()
    for trial in ("pair-0000", "pair-0001"):
        shown_in_mlflow_tab(page, trial)
    assert "compare-runs" in page.locator("#pai-mlflow iframe").get_attribute("src")
    run_from_palette(page, "PAI sweeps", ".pai-SweepsView")  # (back to the Sweeps tab)
    view.locator(".pai-TrialRow[data-trial='0'] .pai-TrialJob").click()  # the trial's job page
    button = page.get_by_role("button", name="Open this job's MLflow run")
    button.wait_for(state="visible", timeout=30_000)
    button.click()
    run_id = env.alice.http.get("/api/v2/jobs/alice~pair-0000").json()["jobStatus"]["mlflowRunId"]
    wait_for(lambda: run_id in (page.locator("#pai-mlflow iframe").get_attribute("src") or ""), 30, "the run's page")
    shown_in_mlflow_tab(page, "Overview")  # MLflow's run page


def shown_in_mlflow_tab(page: Any, text: str) -> None:
    """Wait for ``text`` in the Lab's MLflow tab. MLflow's own page stays as it is when one of its API calls failed
    (its server busy under load, CI once): after a minute it is reloaded once, as a user would, and a failure says
    what the page showed."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    frame = page.frame_locator("#pai-mlflow iframe")
    for again in (True, False):
        try:
            frame.get_by_text(text).first.wait_for(state="visible", timeout=60_000)
            return
        except PlaywrightTimeout:
            if not again:
                shown = frame.locator("body").inner_text(timeout=5_000)[:800]
                raise AssertionError(f"{text!r} is not in the MLflow tab, which shows: {shown!r}") from None
            page.locator("#pai-mlflow iframe").evaluate("f => { f.src = f.src; }")


def git_repo(folder: Path) -> str:
    """``folder`` as a git repository with one commit (a tracked file and a uv.lock), then a tracked file changed;
    the commit's id."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('v1')\n")
    (folder / "uv.lock").write_text("version = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(folder)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run([*git, *args], check=True)
    (folder / "train.py").write_text("print('v2')\n")  # dirty
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_a_pai_submit_cells_run_names_its_notebook_cell_commit_and_lock(
    env: Env, alice_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``%%pai_submit`` in a notebook's kernel: the run says which notebook and cell submitted it (MLflow's source
    and note too), the commit of the notebook's repository and that it had changes, and the lock file's hash."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from pai_jupyter.notebook.magics import PaiMagics

    repo = tmp_path / "repo"
    commit = git_repo(repo)
    notebook = str(repo / "explore.ipynb")
    monkeypatch.setenv("PAI_JUPYTER_HOME", str(alice_home))
    monkeypatch.setenv("JPY_SESSION_NAME", notebook)  # what Jupyter gives a notebook's kernel
    monkeypatch.chdir(repo)
    shell = InteractiveShell.instance()
    magics = PaiMagics(shell)
    shell.register_magics(magics)
    cell = job("from-cell", "import os\nprint('RUN', os.environ['MLFLOW_RUN_ID'], flush=True)")
    try:
        with capture_output() as out:
            shell.run_cell_magic("pai_submit", "--profile alice", cell)
    finally:
        magics.close()
    assert "alice~from-cell" in str([o.data for o in out.outputs]), out.stdout + out.stderr
    assert env.alice.wait("alice~from-cell", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    tags = client_as(env, "alice").get_run(run_of(env, "alice", "from-cell")).data.tags
    assert tags["pai.submittedVia"] == "magic" and tags["pai.notebook"] == notebook
    assert tags["mlflow.source.name"] == notebook and tags["mlflow.source.type"] == "NOTEBOOK"
    assert tags["pai.cell"].startswith("%%pai_submit --profile alice\n") and "from-cell" in tags["pai.cell"]
    assert "%%pai_submit" in tags["mlflow.note.content"]
    assert tags["mlflow.source.git.commit"] == commit and tags["pai.git.dirty"] == "true"
    lock = hashlib.sha256((repo / "uv.lock").read_bytes()).hexdigest()
    assert tags["pai.envLock"] == f"uv.lock:sha256:{lock}"


def test_a_notebook_job_is_a_run_with_its_notebook_parameters_and_commit(env: Env, tmp_path: Path) -> None:
    """``pai run-notebook`` (the cluster's owner: the notebook's folder travels with the job): the run names the
    notebook, has its papermill parameters as params and its repository's commit."""
    repo = tmp_path / "nbrepo"
    commit = git_repo(repo)
    import nbformat

    parameters = nbformat.v4.new_code_cell("lr = 0.01")
    parameters.metadata["tags"] = ["parameters"]
    write_notebook(repo / "train.ipynb", parameters, "print('lr', lr)")
    pai = [sys.executable, "-m", "pai_jupyter.cli"]
    out = subprocess.run(
        [*pai, "run-notebook", str(repo / "train.ipynb"), "-p", "lr", "0.2", "--name", "nb-run"],
        capture_output=True,
        text=True,
        env={**os.environ, "PAI_JUPYTER_HOME": str(env.home)},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    owner = out.stdout.strip().split("~")[0]
    assert env.api.wait(f"{owner}~nb-run", timeout=180)["jobStatus"]["state"] in ("SUCCEEDED", "FAILED")
    run_id = env.api.http.get(f"/api/v2/jobs/{owner}~nb-run").json()["jobStatus"]["mlflowRunId"]
    run = client_as(env, owner).get_run(run_id)
    assert run.data.tags["pai.submittedVia"] == "notebook" and run.data.tags["pai.notebook"].endswith("train.ipynb")
    assert run.data.tags["mlflow.source.git.commit"] == commit
    assert run.data.params["lr"] == "0.2"


def test_an_ended_jobs_outputs_are_its_runs_artifacts_and_its_use_its_system_metrics(env: Env) -> None:
    """An Estimator-layout job with hyperparameters: they are the run's params; what it wrote to its model and logs
    outputs is the run's artifacts once it ended — but not a symlink it planted there (to a file only root may read),
    nor a FIFO (named as left out); while it ran, its CPU and memory use were logged as MLflow's system metrics."""
    script = """
        import os, time
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
        model, logs = os.environ["PAI_OUTPUT_MODEL"], os.environ["PAI_OUTPUT_LOGS"]
        os.makedirs(os.path.join(model, "sub"), exist_ok=True)
        open(os.path.join(model, "weights.txt"), "w").write("w=1\\n")
        open(os.path.join(model, "sub", "config.json"), "w").write("{}")
        open(os.path.join(logs, "train.log"), "w").write("epoch 1\\n")
        os.symlink("/etc/shadow", os.path.join(model, "stolen"))
        os.mkfifo(os.path.join(logs, "pipe"))
        end = time.time() + 6
        while time.time() < end:  # busy: CPU to sample
            sum(range(10000))
    """
    doc = yaml.safe_load(job("outputs", script))
    doc["extras"] = {"com.pai_jupyter.estimator": {"hyperparameters": {"lr": 0.3}}}
    env.alice.submit_ok(yaml.safe_dump(doc, sort_keys=False))
    assert env.alice.wait("alice~outputs", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    client = client_as(env, "alice")
    run_id = run_of(env, "alice", "outputs")
    run = wait_for(lambda: (r := client.get_run(run_id)).data.tags.get("pai.artifacts") and r, 60, "the artifacts")
    assert run.data.params["lr"] == "0.3"
    listed = {a.path for a in client.list_artifacts(run_id, "outputs/model")}
    assert listed == {"outputs/model/weights.txt", "outputs/model/sub"}, listed
    assert {a.path for a in client.list_artifacts(run_id, "outputs/logs")} == {"outputs/logs/train.log"}
    local = client.download_artifacts(run_id, "outputs/model/weights.txt", str(env.home.parent / "dl"))
    assert Path(local).read_text() == "w=1\n"
    said = run.data.tags["pai.artifacts"]
    assert said.startswith("3 files") and "logs/pipe (not a regular file)" in said and "model/stolen" in said
    system = {k for k in run.data.metrics if k.startswith("system/")}
    assert {"system/cpu_utilization_percentage", "system/system_memory_usage_megabytes"} <= system, system
    cpu = client.get_metric_history(run_id, "system/cpu_utilization_percentage")
    assert max(m.value for m in cpu) > 20 and all(m.step >= 0 for m in cpu), [(m.step, m.value) for m in cpu]


def test_a_retried_jobs_attempts_log_one_unbroken_curve_in_its_one_run(env: Env, tmp_path: Path) -> None:
    """A job whose first attempt fails is retried in the same run: the second attempt's points follow the first's
    in one curve, and the run ends FINISHED with the attempt that succeeded."""
    marker = Path("/tmp") / f"pai-retry-{tmp_path.name}-{os.getpid()}"  # (the task's account can write /tmp)
    script = f"""
        import os, sys, mlflow
        print("RUN", os.environ["PAI_MLFLOW_RUN_ID"], flush=True)
        first = not os.path.exists("{marker}")
        open("{marker}", "a").close()
        start = 0 if first else 3
        for step in range(start, start + 3):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
        sys.exit(1 if first else 0)
    """
    doc = yaml.safe_load(job("retried", script))
    doc["jobRetryCount"] = 1
    try:
        env.alice.submit_ok(yaml.safe_dump(doc, sort_keys=False))
        done = env.alice.wait("alice~retried", timeout=180)
    finally:
        marker.unlink(missing_ok=True)
    assert done["jobStatus"]["state"] == "SUCCEEDED" and done["jobStatus"]["retries"] == 1, done["jobStatus"]
    client = client_as(env, "alice")
    run_id = run_of(env, "alice", "retried")
    run = platform_end(client, run_id)
    assert [m.step for m in client.get_metric_history(run_id, "loss")] == [0, 1, 2, 3, 4, 5]
    assert run.data.tags["pai.attempt"] == str(done["jobStatus"]["attemptId"]) and run.data.tags["pai.exitCode"] == "0"
    experiment = run.info.experiment_id
    assert [r.info.run_id for r in client.search_runs([experiment], "attributes.run_name = 'retried'")] == [run_id]


def test_unchanged_autolog_code_logs_its_fit_into_the_jobs_run(env: Env) -> None:
    """``mlflow.autolog()`` and a scikit-learn fit, in code that names no server nor run: the fit's params,
    training metrics and model are in the job's own run (no other run is made)."""
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
        import mlflow
        from sklearn.datasets import load_iris
        from sklearn.linear_model import LogisticRegression

        mlflow.autolog()
        X, y = load_iris(return_X_y=True)
        LogisticRegression(max_iter=300, C=0.5).fit(X, y)
    """
    env.alice.submit_ok(job("autolog", script, {"dataset": "iris"}))
    done = env.alice.wait("alice~autolog", timeout=300)
    assert done["jobStatus"]["state"] == "SUCCEEDED", env.api.log("alice~autolog", name="stderr")[-2000:]
    client = client_as(env, "alice")
    run_id = run_of(env, "alice", "autolog")
    run = wait_for(lambda: (r := client.get_run(run_id)).data.tags.get("pai.state") == "SUCCEEDED" and r, 30, "end")
    assert run.data.params["C"] == "0.5" and run.data.params["dataset"] == "iris"
    assert run.data.metrics["training_accuracy_score"] > 0.9
    assert "model" in {a.path for a in client.list_artifacts(run_id)} or client.search_logged_models(
        experiment_ids=[run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'"
    )
    experiment = run.info.experiment_id
    assert [r.info.run_id for r in client.search_runs([experiment], "attributes.run_name = 'autolog'")] == [run_id]


def test_runs_a_killed_daemon_left_open_are_brought_up_to_their_jobs_after_its_restart(env: Env) -> None:
    """Updates a daemon had queued when it was killed never reach MLflow: after the restart, a run still RUNNING
    whose job ended gets the job's end, and one whose job was deleted meanwhile is ended KILLED (GONE)."""
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
    """
    for name in ("lost-end", "gone"):
        env.alice.submit_ok(job(name, script))
        assert env.alice.wait(f"alice~{name}", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    client = client_as(env, "alice")
    ended, gone = run_of(env, "alice", "lost-end"), run_of(env, "alice", "gone")
    for run_id in (ended, gone):
        platform_end(client, run_id)
    with admin_http(env) as http:  # as if the daemon had been killed before it sent their ends
        for run_id in (ended, gone):
            assert http.post("/api/2.0/mlflow/runs/update", json={"run_id": run_id, "status": "RUNNING"}).is_success
    assert env.alice.http.delete("/api/v2/jobs/alice~gone").status_code == 200
    kill_and_restart(env)
    run = wait_for(lambda: (r := client.get_run(ended)).info.status == "FINISHED" and r, 60, "the end sent again")
    assert run.data.tags["pai.state"] == "SUCCEEDED" and run.data.tags["pai.exitCode"] == "0"
    run = wait_for(lambda: (r := client.get_run(gone)).info.status == "KILLED" and r, 60, "the deleted job's run")
    assert run.data.tags["pai.state"] == "GONE"


def test_an_experiment_made_beforehand_under_a_users_name_never_holds_their_runs(env: Env) -> None:
    """Bob makes an experiment called ``pai/dave`` before Dave's first job (any account may name one so, and its
    maker could read what is logged there): Dave's runs go to an experiment of his own, which Bob cannot read."""
    assert env.bob.http.get("/api/v2/local/tracking").status_code == 200  # (Bob's MLflow account exists)
    bob = client_as(env, "bob")
    squatted = bob.create_experiment("pai/dave")
    dave = env.api.new_user("dave")
    script = """
        import os, mlflow
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
        mlflow.log_metric("secret", 42.0)
    """
    dave.submit_ok(job("mine", script))
    assert dave.wait("dave~mine", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    run_id = run_of(env, "dave", "mine")
    run = client_as(env, "dave").get_run(run_id)
    assert run.info.experiment_id != squatted and run.data.metrics["secret"] == 42.0
    with pytest.raises(MlflowException):
        bob.get_run(run_id)
    assert bob.search_runs([squatted]) == []
    mine = dave.http.get("/api/v2/local/tracking").json()
    assert mine["experimentId"] == run.info.experiment_id and mine["experiment"].startswith("pai/dave-"), mine


def test_reports_the_server_missed_reach_the_run_when_the_job_ends(env: Env) -> None:
    """``pai_jupyter.report()`` keeps each report in the task's file and sends it to the run; one the server did not
    take (here: the task had it unreachable) reaches the run from the daemon's copy when the job ends, and a report
    that did reach it is not doubled."""
    script = """
        import os
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
        from pai_jupyter import report
        report(step=1, loss=0.5)
        os.environ["MLFLOW_TRACKING_URI"] = "http://127.0.0.1:9"  # the server out of reach for the next two
        report(step=2, loss=0.25)
        report(step=3, loss=0.125)
    """
    env.alice.submit_ok(job("missed", script))
    assert env.alice.wait("alice~missed", timeout=120)["jobStatus"]["state"] == "SUCCEEDED"
    assert "did not take these metrics" in env.api.log("alice~missed", name="stderr")
    client = client_as(env, "alice")
    run_id = run_of(env, "alice", "missed")

    def whole() -> object:
        history = client.get_metric_history(run_id, "loss")
        return history if len(history) >= 3 else None

    history = wait_for(whole, 60, "the missed reports in the run")
    assert [(m.step, m.value) for m in history] == [(1, 0.5), (2, 0.25), (3, 0.125)]
