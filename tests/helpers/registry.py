"""The server registry's tests' stand-ins: a client of the cluster kept in memory, and running a coroutine to its
end or to its refusal."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from pai_jupyter.client import JobNotFound, PaiError, ServiceAction, TaskService
from pai_jupyter.server.common import PaiHTTPError
from pai_jupyter.server.config import PaiJupyter
from pai_jupyter.server.registry import Registry

JOB = "alice~train"


class MemoryClient:
    """The few AsyncClient calls the registry makes, answered from ``items``; every call is recorded."""

    username = "alice"
    profile = SimpleNamespace(name="memory")

    def __init__(self, state: str = "running") -> None:
        self.items: dict[str, list[dict[str, Any]]] = {
            JOB: [
                {
                    "role": "main",
                    "index": 0,
                    "name": "tensorboard",
                    "host": "127.0.0.1",
                    "port": 6006,
                    "state": state,
                    "token": None,
                    "basePath": "/tb/",
                },
                {
                    "role": "main",
                    "index": 0,
                    "name": "jupyter",
                    "host": "127.0.0.1",
                    "port": 8890,
                    "state": state,
                    "token": "t0k",
                    "basePath": "/jp/",
                },
            ]
        }
        self.calls: list[tuple[Any, ...]] = []
        self.error: PaiError | None = None
        self.action_error: PaiError | None = None
        self.start_makes = "running"
        self.task_state = "RUNNING"
        self.submitted = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

    async def services(self, job: str) -> list[TaskService]:
        self.calls.append(("services", job))
        if self.error is not None:
            raise self.error
        if job not in self.items:
            raise JobNotFound(f"job {job} was not found", status=404)
        return [TaskService.model_validate(i) for i in self.items[job]]

    async def service_action(self, job: str, role: str, index: int, name: str, action: str) -> ServiceAction:
        self.calls.append(("action", job, role, index, name, action))
        if self.action_error is not None:
            raise self.action_error
        for item in self.items[job]:
            if (item["role"], item["index"], item["name"]) == (role, index, name):
                item["state"] = self.start_makes if action == "start" else "stopped"
        return ServiceAction(role=role, index=index, name=name, action=action)

    async def detail(self, job: str) -> Any:
        self.calls.append(("detail", job))
        if job not in self.items:
            raise JobNotFound(f"job {job} was not found", status=404)
        return SimpleNamespace(
            tasks=[SimpleNamespace(role="main", task_index=0, task_state=self.task_state)],
            job_status=SimpleNamespace(submission_time=self.submitted, created_time=None),
        )

    async def terminal_endpoint(self, job: str, role: str, index: int) -> tuple[str, dict[str, str]]:
        return f"ws://127.0.0.1:1/api/v2/local/jobs/{job}/terminals/{role}/{index}", {"Authorization": "Bearer x"}

    def socket_for(self, url: str) -> str | None:
        return "/the/daemon/api.sock" if url.startswith("ws://127.0.0.1:1/") else None

    def services_calls(self) -> int:
        return sum(1 for c in self.calls if c[0] == "services")


def run(
    body: Callable[[Registry, MemoryClient], Awaitable[None]], client: MemoryClient | None = None, **config: Any
) -> None:
    client = client or MemoryClient()
    settings = {"resolve_cache_seconds": 60.0, "service_start_timeout": 30.0, **config}
    asyncio.run(body(Registry(client, PaiJupyter(**settings)), client))  # type: ignore[arg-type]


async def refused(coro: Awaitable[Any]) -> PaiHTTPError:
    with pytest.raises(PaiHTTPError) as info:
        await coro
    return info.value
