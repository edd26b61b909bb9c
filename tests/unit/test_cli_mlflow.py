"""``pai mlflow env`` prints the caller's tracking as shell exports that survive any character in them."""

from __future__ import annotations

import shlex

import pytest
from click.testing import CliRunner

from pai_jupyter.cli import main
from pai_jupyter.cli import tracking as command
from pai_jupyter.client.models import Tracking


class Answers:
    def tracking(self) -> Tracking:
        return Tracking.model_validate(
            {
                "url": "http://127.0.0.1:5000",
                "experiment": "pai/alice",
                "experimentId": "1",
                "username": "alice",
                "password": "it's $(not) run",
            }
        )


def test_env_prints_exports_a_shell_reads_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command, "client_for", lambda profile: Answers())
    out = CliRunner().invoke(main, ["mlflow", "env"])
    assert out.exit_code == 0, out.output
    exported = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in out.output.splitlines())
    assert exported == {
        "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000",
        "MLFLOW_EXPERIMENT_NAME": "pai/alice",
        "MLFLOW_TRACKING_USERNAME": "alice",
        "MLFLOW_TRACKING_PASSWORD": "it's $(not) run",
    }


def test_env_on_a_server_without_accounts_exports_no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """A site's MLflow server without authentication (``--mlflow-uri`` alone): no username nor password."""

    class NoAuth:
        def tracking(self) -> Tracking:
            return Tracking.model_validate(
                {
                    "url": "http://mlflow.lab:5000",
                    "experiment": "pai/alice",
                    "experimentId": "1",
                    "username": "pai-alice",
                }
            )

    monkeypatch.setattr(command, "client_for", lambda profile: NoAuth())
    out = CliRunner().invoke(main, ["mlflow", "env"])
    assert out.exit_code == 0, out.output
    assert out.output == "export MLFLOW_TRACKING_URI=http://mlflow.lab:5000\nexport MLFLOW_EXPERIMENT_NAME=pai/alice\n"
