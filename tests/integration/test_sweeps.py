"""Sweeps against real daemons (docs/sweeps.md): reports stored and served with the job (REST, authenticated,
own jobs only), a 50-trial Optuna sweep with 2 trials at a time that finds the best region, a driver killed
with SIGKILL and resumed by ``Sweep.attach``, stop all, and the same sweep on a second daemon through a profile."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pai_jupyter.client import Client
from pai_jupyter.client.profiles import Profile, upsert_profile
from pai_jupyter.sweep import Sweep, SweepTaken, choice, trial_job
from tests.helpers.daemon import Api, v1
from tests.helpers.servers import servers
from tests.helpers.sweeps import ROOT, TRIAL, template
from tests.polling import wait_for


def max_overlap(client: Client, jobs: list[str]) -> int:
    """The most trials that ran at once (from their launch and completion times)."""
    spans = []
    for job in jobs:
        status = client.detail(job).job_status
        extra = status.model_extra or {}
        start, end = extra.get("appLaunchedTime") or extra.get("createdTime"), extra.get("completedTime")
        if start and end:
            spans.append((start, end))
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _, d in points:
        now += d
        most = max(most, now)
    return most


@pytest.fixture
def client(daemon: Api) -> Iterator[Client]:
    with Client() as c:
        yield c


def test_reports_are_stored_with_the_job_and_only_its_owner_reads_them(daemon: Api, client: Client) -> None:
    job = daemon.submit_ok(v1("reporter", f"PYTHONPATH={ROOT} {sys.executable} {TRIAL} --x 0.5 --steps 2"))
    daemon.wait(job)
    found = client.reports(job)
    assert [(r.step, r.source) for r in found] == [(0, "main/0"), (1, "main/0")]
    assert found[-1].metrics["loss"] == pytest.approx(0.04)
    client.report(job, step=7, accuracy=0.9)
    assert (client.reports(job)[-1].step, client.reports(job)[-1].metrics) == (7, {"accuracy": 0.9})
    route = f"/api/v2/local/jobs/{job}/reports"
    assert daemon.http.post(route, json={"metrics": {"loss": "nan"}}).status_code == 400
    assert daemon.http.post(route, json={"metrics": {"loss": 1}, "step": -1}).status_code == 400
    assert httpx.get(daemon.url + route).status_code == 401
    other = daemon.new_user("mallory")
    assert other.http.get(route).status_code == 404
    assert other.http.post(route, json={"metrics": {"loss": 0}}).status_code == 404


def test_sweep_state_is_the_owners_and_written_over_its_revision(daemon: Api) -> None:
    route = "/api/v2/local/sweeps/" + daemon.http.get("/api/v2/info").json()["user"] + "~s1"
    assert daemon.http.put(route, json={"state": {"status": "new"}, "revision": 0}).json() == {"revision": 1}
    assert daemon.http.put(route, json={"state": {"status": "x"}, "revision": 0}).status_code == 409
    assert daemon.http.get(route).json()["state"] == {"status": "new"}
    other = daemon.new_user("mallory")
    assert other.http.get(route).status_code == 404
    assert other.http.put(route, json={"state": {}, "revision": 1}).status_code == 404
    assert other.http.get("/api/v2/local/sweeps").json() == {"sweeps": []}


DRIVER = """
import sys
from pai_jupyter.sweep import Sweep, loguniform, uniform
from tests.helpers.sweeps import template
Sweep("bowl", template(), {"x": uniform(0, 1), "lr": loguniform(1e-4, 1)}, search="optuna", max_trials=50,
      concurrency=2, seed=1, poll=0.05).run()
"""


@pytest.mark.slow
def test_optuna_sweep_finds_the_best_region_and_resumes_after_its_driver_is_killed(daemon: Api, client: Client) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=ROOT, env=env)
    try:
        wait_for(lambda: driver.poll() is not None or _trials(client, "bowl") >= 12, 120, "12 trials of driver 1")
        assert driver.poll() is None, "the first driver ended by itself"
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    at_kill = _trials(client, "bowl")
    assert 12 <= at_kill < 50, at_kill  # the second driver has trials of its own to run
    sweep = Sweep.attach("bowl", client=client)
    sweep.poll = 0.05
    assert sweep.status == "running"
    sweep.run(timeout=300)
    assert sweep.status == "done" and len(sweep.trials) == 50
    assert [t["number"] for t in sweep.trials] == list(range(50))
    states = {t["state"] for t in sweep.trials}
    assert states <= {"SUCCEEDED", "PRUNED"} and "SUCCEEDED" in states, states
    assert all(t["intermediate"] for t in sweep.trials)  # the objective at each reported step
    best = sweep.best()
    assert best is not None and abs(best["params"]["x"] - 0.3) < 0.15 and 1e-3 < best["params"]["lr"] < 0.1, best
    tagged = client.list_jobs(keyword="bowl-")
    assert {j.name for j in tagged} == {f"bowl-{n:04d}" for n in range(50)}
    assert max_overlap(client, [t["job"] for t in sweep.trials]) <= 2


def _trials(client: Client, name: str) -> int:
    try:
        return client.sweep_state(name).trials
    except Exception:
        return 0


def test_stop_all_from_another_driver_stops_the_running_trials(daemon: Api, client: Client) -> None:
    sweep = Sweep(
        "long",
        template(steps=100, sleep=0.2),
        {"x": choice(0.1, 0.2, 0.3, 0.4), "lr": [0.01]},
        concurrency=2,
        client=client,
        poll=0.05,
    )
    sweep.start()
    wait_for(
        lambda: (
            sweep.error or (sum(t["state"] == "RUNNING" for t in sweep.trials) == 2 and _trials(client, "long") == 2)
        ),
        60,
        "two running trials, stored",
    )
    assert sweep.error is None
    Sweep.attach("long", client=client).stop_all()
    sweep.wait(60)
    assert sweep.status == "done"
    assert [t["state"] for t in sweep.trials] == ["STOPPED", "STOPPED"]
    with pytest.raises(ValueError, match=r"attach\('long'\) resumes it"):  # a name is one sweep
        Sweep("long", template(), {"x": [1]}, client=client)


def test_the_same_sweep_runs_on_a_second_daemon_through_a_profile(tmp_path: Path) -> None:
    with servers(tmp_path) as s:
        a = s.daemon(tmp_path / "home-a")
        b = s.daemon(tmp_path / "home-b")
        user = b.http.get("/api/v2/info").json()["user"]
        upsert_profile(Profile(name="other", url=b.url, username=user, token=b.token), tmp_path / "home-a")
        os.environ["PAI_JUPYTER_HOME"] = str(tmp_path / "home-a")
        try:
            sweep = Sweep("grid", template(), {"x": [0.0, 0.3, 0.6], "lr": [0.01]}, profile="other", poll=0.05)
            sweep.run(timeout=120)
        finally:
            del os.environ["PAI_JUPYTER_HOME"]
        assert sweep.status == "done" and sweep.best()["params"] == {"x": 0.3, "lr": 0.01}  # type: ignore[index]
        jobs = {j["name"]: j["tags"] for j in b.http.get("/api/v2/jobs").json()}
        assert jobs == {f"grid-000{n}": ["sweep:grid"] for n in range(3)}  # ordinary jobs, tagged
        assert a.http.get("/api/v2/jobs").json() == []
        assert [x["name"] for x in b.http.get("/api/v2/local/sweeps").json()["sweeps"]] == ["grid"]


def test_a_trial_submitted_but_not_stored_is_adopted_by_the_next_driver(daemon: Api, client: Client) -> None:
    """A driver killed between a trial's submission and the state's write: the job is there under the trial's
    name; the next driver takes it (with the parameters it ran with) instead of failing on the name."""
    client.submit(trial_job(template(), "adopt-0000", {"x": 0.6, "lr": 0.01}))
    sweep = Sweep("adopt", template(), {"x": [0.0, 0.3], "lr": [0.01]}, client=client, poll=0.05).run(timeout=60)
    assert [(t["job"].split("~")[1], t["params"]) for t in sweep.trials] == [
        ("adopt-0000", {"x": 0.6, "lr": 0.01}),
        ("adopt-0001", {"x": 0.3, "lr": 0.01}),
    ]
    assert [t["state"] for t in sweep.trials] == ["SUCCEEDED", "SUCCEEDED"]
    assert sweep.best()["params"]["x"] == 0.3  # type: ignore[index]
    assert client.detail("adopt-0000").model_extra is not None
    assert {j["tags"][0] for j in daemon.http.get("/api/v2/jobs").json()} == {"sweep:adopt"}


TENSORBOARD_TRIAL = """
import os, time
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter
logs = os.path.join(os.environ["PAI_TASK_DIR"], "run", "tensorboard")
os.makedirs(logs + "/train")
w = EventFileWriter(logs + "/train")
for step in range(2):
    v = Summary.Value(tag="loss", simple_value=0.5 / (step + 1))
    w.add_event(Event(step=step, wall_time=time.time(), summary=Summary(value=[v])))
w.close()
os.symlink(os.environ["OUTSIDE"], logs + "/events.out.tfevents.1.planted")  # someone else's file
"""


def test_tensorboard_scalars_of_a_task_are_reports_and_a_planted_link_is_not_followed(
    daemon: Api, client: Client, tmp_path: Path
) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    outside = EventFileWriter(str(tmp_path / "outside"))
    secret = Summary(value=[Summary.Value(tag="secret", simple_value=1.0)])
    outside.add_event(Event(step=0, wall_time=1.0, summary=secret))
    outside.close()
    planted = next((tmp_path / "outside").glob("*tfevents*"))
    script = tmp_path / "tb.py"
    script.write_text(TENSORBOARD_TRIAL)
    tmp_path.chmod(tmp_path.stat().st_mode | 0o005)
    script.chmod(0o644)
    job = daemon.submit_ok(v1("tb", f"OUTSIDE={planted} {sys.executable} {script}"))
    assert daemon.wait(job)["jobStatus"]["state"] == "SUCCEEDED", daemon.log(job)
    found = client.reports(job)
    assert [(r.step, r.metrics, r.source) for r in found] == [
        (0, {"train/loss": 0.5}, "tensorboard:main/0"),
        (1, {"train/loss": 0.25}, "tensorboard:main/0"),
    ]


ESTIMATOR_TRIAL = """
import json, os, sys
sys.path.insert(0, os.environ["PAI_ROOT"])
import pai_jupyter
hps = json.load(open(os.path.join(os.environ["PAI_CONFIG_DIR"], "hyperparameters.json")))
loss = (hps["x"] - 0.3) ** 2
pai_jupyter.report(loss=loss, step=0)
json.dump({"x": hps["x"], "base": hps["base"]}, open(os.path.join(os.environ["PAI_OUTPUT_MODEL"], "model.json"), "w"))
"""


def test_an_estimator_sweep_sets_hyperparameters_and_gives_the_best_models_data(
    daemon: Api, client: Client, tmp_path: Path
) -> None:
    from pai_jupyter import Estimator

    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(ESTIMATOR_TRIAL)
    est = Estimator(f"PAI_ROOT={ROOT} {sys.executable} train.py", source_dir=src, hyperparameters={"base": 1},
                    memory=256, client=client)  # fmt: skip
    sweep = Sweep("est", est, {"x": [0.0, 0.3, 0.9]}, client=client, poll=0.05).run(timeout=120)
    assert [t["state"] for t in sweep.trials] == ["SUCCEEDED"] * 3, [client.logs(t["job"]) for t in sweep.trials]
    model = json.loads((Path(sweep.model_data()) / "model.json").read_text())
    assert model == {"x": 0.3, "base": 1}  # the best trial's own hyperparameters, beside the Estimator's


def test_a_second_driver_takes_over_and_the_first_stops_with_sweep_taken(daemon: Api, client: Client) -> None:
    first = Sweep("twice", template(steps=2, sleep=0.1), {"x": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], "lr": [0.01]},
                  client=client, poll=0.05).start()  # fmt: skip
    wait_for(lambda: first.error or _trials(client, "twice") >= 2, 60, "the first driver's trials, stored")
    second = Sweep.attach("twice", client=client)
    second.poll = 0.05
    second.run(timeout=120)
    with pytest.raises(SweepTaken):
        first.wait(60)
    assert second.status == "done"
    assert [t["job"].split("~")[1] for t in second.trials] == [f"twice-000{n}" for n in range(6)]
    assert [t["state"] for t in second.trials] == ["SUCCEEDED"] * 6
    assert len(client.list_jobs(keyword="twice-")) == 6  # no trial ran twice
