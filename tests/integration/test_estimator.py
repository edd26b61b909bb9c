"""The Estimator on the embedded cluster: hyperparameters, file and directory inputs, model output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pai_jupyter import Estimator
from pai_jupyter.client import Client
from tests.helpers.daemon import Api

TRAIN = """
import json, os, sys
hps = json.load(open(os.path.join(os.environ["PAI_CONFIG_DIR"], "hyperparameters.json")))
train = os.environ["PAI_INPUT_TRAIN"]
test_dir = os.environ["PAI_INPUT_TEST"]
rows = open(train).read().split()
files = sorted(os.listdir(test_dir))
print("epochs", hps["epochs"], type(hps["epochs"]).__name__, "lr", hps["learning-rate"])
print("env", os.environ["PAI_HPS_EPOCHS"], os.environ["PAI_HPS_LEARNING_RATE"], os.environ["PAI_USER_ARGS"])
print("cwd", os.getcwd() == os.environ["PAI_WORKING_DIR"].rstrip("/"), "helper", __import__("helper").VALUE)
model = os.path.join(os.environ["PAI_OUTPUT_MODEL"], "model.json")
json.dump({"rows": len(rows), "test_files": files, "epochs": hps["epochs"]}, open(model, "w"))
"""


def test_fit_reads_hyperparameters_and_inputs_and_writes_a_model(daemon: Api, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(TRAIN)
    (src / "helper.py").write_text("VALUE = 'imported'\n")
    data = tmp_path / "data"
    (data / "test").mkdir(parents=True)
    (data / "train.csv").write_text("1\n2\n3\n")
    (data / "test" / "a.csv").write_text("x")
    (data / "test" / "b.csv").write_text("y")
    est = Estimator(
        command="python3 train.py",
        source_dir=src,
        image_uri="busybox",
        hyperparameters={"epochs": 10, "learning-rate": 0.001},
        base_job_name="mnist",
        memory=512,
    )
    detail = est.fit({"train": data / "train.csv", "test": data / "test"}, logs=False)
    assert detail.state == "SUCCEEDED"
    model = Path(est.model_data()) / "model.json"
    assert json.loads(model.read_text()) == {"rows": 3, "test_files": ["a.csv", "b.csv"], "epochs": 10}
    out = Client().logs(est.job, stream="stdout")
    assert "epochs 10 int lr 0.001" in out
    assert "env 10 0.001 --epochs 10 --learning-rate 0.001" in out
    assert "cwd True helper imported" in out
    assert Path(est.tensorboard()).is_dir()


def test_a_failing_requirements_install_is_reported_as_such(daemon: Api, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "requirements.txt").write_text("this-package-does-not-exist-pai-jupyter==0.0.1\n")
    est = Estimator(command="echo never", source_dir=src, image_uri="busybox", memory=512)
    with pytest.raises(RuntimeError) as info:
        est.fit(logs=False)
    assert "226" in str(info.value)
    detail = Client().detail(est.job)
    assert detail.tasks[0].container_exit_spec["phrase"] == "RequirementsInstallFailed"
    assert "installing requirements.txt failed" in Client().logs(est.job, stream="stderr")


def test_missing_input_is_refused_at_submit(daemon: Api, tmp_path: Path) -> None:
    from pai_jupyter.client import InvalidJob

    est = Estimator(command="true", image_uri="busybox")
    with pytest.raises(InvalidJob) as info:
        est.fit({"train": tmp_path / "nope.csv"})
    assert "input train" in str(info.value) and "does not exist" in str(info.value)


def test_other_users_may_not_name_host_paths(daemon: Api, tmp_path: Path) -> None:
    token = daemon.http.post("/api/v2/local/users", json={"name": "dave"}).json()["token"]
    est = Estimator(
        command="cat $PAI_INPUT_SECRET",
        image_uri="busybox",
        client=Client(url=daemon.url, token=token, username="dave"),
    )
    from pai_jupyter.client import Unauthorized

    with pytest.raises(Unauthorized):
        est.fit({"secret": "/etc/hostname"})


def test_image_catalogue() -> None:
    from pai_jupyter.sdk.images import list_images, retrieve

    assert any(i.framework == "pytorch" for i in list_images())
    assert all(i.framework == "tensorflow" for i in list_images("tensorflow"))
    assert retrieve("tensorflow", "2.17", "gpu") == "tensorflow/tensorflow:2.17.0-gpu"
    with pytest.raises(LookupError):
        retrieve("nosuchframework")
