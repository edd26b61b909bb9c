"""``GET /api/v2/local/tracking``: where the caller's jobs are tracked (the cluster's MLflow server, their
experiment) and their own MLflow credentials, for their notebook or terminal (``pai mlflow env``); the same their
tasks get. 404 where tracking is off (docs/tracking.md)."""

from __future__ import annotations

from typing import Any

from ..core.errors import NoApiError
from .base import Base, Route


class Tracking(Base):
    async def get(self) -> None:
        tracker = self.cluster.state.tracker
        if tracker is None:
            raise NoApiError("jobs are not tracked in MLflow on this cluster (pai cluster start --mlflow on)")
        user = self.user["name"]
        if not await tracker.wait_ready(5.0):
            raise NoApiError("the cluster's MLflow server is not answering (yet): see local/mlflow-server.log")
        experiment = await tracker.experiment_of(user)
        self.set_header("Cache-Control", "no-store")
        self.write_json(
            {
                "url": tracker.config.task_url,
                "experiment": tracker.experiment_name_of(user),
                "experimentId": experiment,
                "username": tracker.account(user),
                **({"password": tracker.password(user)} if tracker.config.admin is not None else {}),
            }
        )


def routes(args: dict[str, Any]) -> list[Route]:
    return [(r"/api/v2/local/tracking", Tracking, args)]
