"""Every job an MLflow run on the Docker runtime (docs/tracking.md): a container, on the host's network, gets the
job's run and its owner's credentials in its environment and logs into that run with nothing but busybox's wget
(MLflow's REST API), as any client in a user's image would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.paths import local_dir
from pai_jupyter.cluster.tracking.tracker import user_password
from tests.helpers.daemon import Api, docker_or_skip, remove_accounts
from tests.helpers.mlflow_jobs import start_tracked
from tests.polling import wait_for

pytestmark = pytest.mark.slow
LOG = (
    'AUTH=$(printf %s "$MLFLOW_TRACKING_USERNAME:$MLFLOW_TRACKING_PASSWORD" | base64 | tr -d "\\n"); '
    'echo "RUN $MLFLOW_RUN_ID"; '
    'wget -q -O- --header "Content-Type: application/json" --header "Authorization: Basic $AUTH" '
    '--post-data "{\\"run_id\\":\\"$MLFLOW_RUN_ID\\",\\"metrics\\":[{\\"key\\":\\"from_docker\\",\\"value\\":1,'
    '\\"timestamp\\":1,\\"step\\":0}]}" "$MLFLOW_TRACKING_URI/api/2.0/mlflow/runs/log-batch"'
)


@pytest.fixture
def tracked(pai_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Api, str]]:
    docker_or_skip()
    yield start_tracked(pai_home, "docker", monkeypatch)
    control.stop(pai_home)
    remove_accounts(pai_home)
    import docker

    for c in docker.from_env().containers.list(all=True, filters={"label": "pai.managed=1"}):
        if str(pai_home) in str(c.attrs.get("Mounts")):
            c.remove(force=True)


def test_a_containers_task_logs_into_its_jobs_run(tracked: tuple[Api, str], pai_home: Path) -> None:
    api, url = tracked
    alice = api.new_user("alice")
    job = {
        "jobName": "in-docker",
        "image": "pai-test/busybox:latest",
        "taskRoles": [
            {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": LOG}
        ],
    }
    alice.submit_ok(json.dumps(job))
    done = alice.wait("alice~in-docker", timeout=120)
    out = alice.log("alice~in-docker", name="all")
    assert done["jobStatus"]["state"] == "SUCCEEDED", out[-1500:]
    run_id = next(line.split()[1] for line in out.splitlines() if line.startswith("RUN "))
    key = json.loads((local_dir(pai_home) / "mlflow-secrets.json").read_text())["users_key"].encode()
    with httpx.Client(base_url=url, auth=("alice", user_password(key, "alice")), timeout=30) as mine:

        def ended() -> dict[str, object] | None:
            run = mine.get("/api/2.0/mlflow/runs/get", params={"run_id": run_id}).json()["run"]
            tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
            return run if tags.get("pai.state") == "SUCCEEDED" else None

        run = wait_for(ended, 60, "the platform's end of the run")
    metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}  # type: ignore[index]
    assert metrics["from_docker"] == 1.0, metrics
