"""GPU-idle release against a real daemon (process runtime, 2 scheduled GPUs) with an injected sampler
(``gpuIdle.sampler`` in cluster.yaml names a fake that reads utilisations from a file and counts its calls): an
interactive job whose GPU is busy keeps running; once idle it is warned (an event and its runtime log), then
stopped with the reason; a batch job with an idle GPU is never stopped."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pai_jupyter.cluster import control
from pai_jupyter.cluster.core.sharing import INTERACTIVE_KEY
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1
from tests.helpers.gpu import FAKE, Fake
from tests.polling import wait_for


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Api, Fake]]:
    (tmp_path / "fakes").mkdir()
    (tmp_path / "fakes" / "fake_gpus.py").write_text(FAKE)
    fake = Fake(tmp_path / "gpus.json")
    fake.set(g0=90, g1=90)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "fakes"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PAI_TEST_FAKE_GPUS", str(fake.path))
    home = tmp_path / "home"
    (home / "local").mkdir(parents=True)
    config = {
        "gpuIdle": {
            "afterMinutes": 0.05,  # 3 s
            "warnMinutes": 0.03,  # the warning 1.8 s before the stop
            "underPercent": 5,
            "everySeconds": 1,
            "sampler": "fake_gpus:sample",
        }
    }
    (home / "local" / "cluster.yaml").write_text(yaml.safe_dump(config))
    api = start_daemon(home, gpus=2)
    try:
        yield api, fake
    finally:
        control.stop(home)
        kill_leftovers(home)


def _job(name: str, interactive: bool | None) -> str:
    doc = json.loads(v1(name, "echo gpu=$CUDA_VISIBLE_DEVICES; sleep 300", gpuNumber=1))
    if interactive is not None:
        doc["extras"] = {INTERACTIVE_KEY: interactive}
    return json.dumps(doc)


def _gpu(api: Api, job: str) -> str:
    """The GPU index the task got (it prints its CUDA_VISIBLE_DEVICES)."""
    api.wait(job, ("RUNNING",))
    line = wait_for(lambda: [x for x in api.log(job).splitlines() if x.startswith("gpu=")], 30, f"{job}'s GPU")[0]
    return "g" + line.removeprefix("gpu=")


def _events(api: Api, job: str) -> list[dict[str, object]]:
    data: list[dict[str, object]] = api.http.get(f"/api/v2/jobs/{job}/events").json()["data"]
    return data


def test_an_idle_interactive_job_is_warned_then_stopped_and_a_busy_or_batch_one_is_not(
    env: tuple[Api, Fake],
) -> None:
    api, fake = env
    interactive = api.submit_ok(_job("notebook", True))
    batch = api.submit_ok(_job("training", None))
    mine, theirs = _gpu(api, interactive), _gpu(api, batch)
    assert {mine, theirs} == {"g0", "g1"}
    fake.wait_calls(6)  # twice the idle time, busy: nothing happens
    assert api.detail(interactive)["jobStatus"]["state"] == "RUNNING"
    assert not [e for e in _events(api, interactive) if e.get("reason") == "GpuIdle"]

    fake.set(**{mine: 1, theirs: 1})  # under 5 %
    warned = wait_for(
        lambda: [e for e in _events(api, interactive) if e.get("reason") == "GpuIdle"], 30, "the GpuIdle warning"
    )
    assert warned[0]["type"] == "Warning" and "will be stopped in" in str(warned[0]["message"])
    done = api.wait(interactive, timeout=30)
    assert done["jobStatus"]["state"] == "STOPPED"
    assert "GPUs stayed under 5% utilisation for 0.05 minutes" in done["jobStatus"]["appExitDiagnostics"]
    assert "will be stopped in" in api.log(interactive, attempt=0, name="runtime")

    fake.set(**{mine: 80, theirs: 1})
    busy = api.submit_ok(_job("notebook-busy", True))  # gets the freed GPU, and uses it
    assert _gpu(api, busy) == mine
    fake.wait_calls(6)  # the batch job's GPU stays idle as long: it is not judged; the busy one is not stopped
    for job in (batch, busy):
        assert api.detail(job)["jobStatus"]["state"] == "RUNNING"
        assert not [e for e in _events(api, job) if e.get("reason") == "GpuIdle"]
        api.stop(job)
        api.wait(job)
