"""The shapes of the answers the Lab reads (``labextension/src/api.ts`` declares the same ones in TypeScript).

mypy holds the code that builds each answer to its type here; ``tests/unit/test_lab_api_contract.py`` holds
api.ts's interfaces to these (field names and which are optional). A field renamed, added or dropped on one side
only fails one of them: change both (CONTRIBUTING.md)."""

from __future__ import annotations

from typing import Any

from typing_extensions import NotRequired, TypedDict  # typing's, before 3.11, misses NotRequired

from ..common.services import Link as ServiceLink


class ListedService(ServiceLink):
    state: str


class TaskRow(TypedDict):
    role: str
    index: int
    state: str
    services: list[ListedService]
    terminalUrl: str | None
    terminalPage: str | None


class JobRow(TypedDict):
    id: str
    name: str
    username: str
    state: str
    submissionTime: str | None
    totalTaskNumber: int
    totalGpuNumber: int
    launchedTime: str | None
    completedTime: str | None
    retries: int
    virtualCluster: str | None
    appExitCode: int | None
    metricsUrl: str
    tasks: list[TaskRow]
    servicesMessage: str | None


class JobList(TypedDict):
    """``GET pai/api/jobs``."""

    profile: str
    user: str
    jobs: list[JobRow]


class TaskDetail(TypedDict):
    role: str
    index: int
    state: str
    ip: str | None
    ports: dict[str, Any]
    exitCode: int | None
    diagnostics: str | None
    retries: int
    launchedTime: str | None
    completedTime: str | None
    terminalPage: str | None
    services: list[ServiceLink]  # only those the task has
    tensorboardPage: NotRequired[str]  # an ended task's TensorBoard, started on demand over its logdir


class Event(TypedDict, total=False):
    """One of the job's events as the cluster gives them (OpenPAI's), of which the job page reads these."""

    time: str
    type: str
    reason: str
    message: str


class JobDetail(TypedDict):
    """``GET pai/api/jobs/{user}~{name}`` (``?events=1`` adds the events)."""

    id: str
    name: str
    username: str
    state: str
    final: bool
    virtualCluster: str | None
    retries: int
    submissionTime: str | None
    launchedTime: str | None
    completedTime: str | None
    exitCode: int | None
    diagnostics: str | None
    waitingReason: str | None
    totalGpuNumber: int
    totalTaskNumber: int
    tasks: list[TaskDetail]
    metricsUrl: str
    events: NotRequired[list[Event]]
    eventsMessage: NotRequired[str]
