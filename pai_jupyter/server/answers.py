"""The shapes of the answers the Lab reads (``labextension/src/api.ts`` declares the same ones in TypeScript).

mypy holds the code that builds each answer to its type here; ``tests/unit/test_lab_api_contract.py`` holds
api.ts's interfaces to these (field names, which are optional, and their JSON types, null included). A field renamed,
added, dropped or retyped on one side only fails one of them: change both (CONTRIBUTING.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from typing_extensions import NotRequired, TypedDict  # typing's, before 3.11, misses NotRequired

from ..common.services import Link as ServiceLink


def fields_named(model: type[BaseModel], keys: Iterable[str]) -> set[str]:
    """The fields of a client model whose wire names are ``keys`` (an answer's, read off the model with
    ``model_dump(by_alias=True, include=...)``); a key the model lacks raises KeyError, on import, not in a browser."""
    names = {(f.alias or n): n for n, f in model.model_fields.items()}
    return {names[key] for key in keys}


class ListedService(ServiceLink):
    state: str


class TaskRow(TypedDict):
    role: str
    index: int
    state: str
    services: list[ListedService]
    terminalUrl: str | None
    terminalPage: str | None


class JobFields(TypedDict):
    """What the job list's row and the job page both say of a job: the client's JobSummary fields under their wire
    names (``jobs.job_fields`` reads them off the model), and where its metrics stream is."""

    id: str
    name: str
    username: str
    state: str
    submissionTime: str | None
    launchedTime: str | None
    completedTime: str | None
    retries: int
    totalTaskNumber: int
    totalGpuNumber: int
    virtualCluster: str | None
    metricsUrl: str


class JobRow(JobFields):
    appExitCode: int | None
    preempting: bool  # being preempted now: its tasks have their signal and are in their grace
    tasks: list[TaskRow]
    servicesMessage: str | None
    sweep: str | None  # the sweep this job is a trial of (its tag sweep:NAME): the sidebar groups them


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
    """One of the job's events (OpenPAI's, ``lab_api.event_json``): when it (last) happened, and what."""

    time: str
    type: str
    reason: str
    message: str


class JobDetail(JobFields):
    """``GET pai/api/jobs/{user}~{name}`` (``?events=1`` adds the events)."""

    final: bool
    exitCode: int | None
    diagnostics: str | None
    waitingReason: str | None
    tasks: list[TaskDetail]
    mlflowPage: str | None  # the job's MLflow run in the UI through this server; null: the job has none
    serviceIcons: dict[str, str]  # the services catalogue's icons by name (its buttons and tabs)
    mlflowHint: NotRequired[str | None]  # for a job without a run: how to turn tracking on, where it is off
    events: NotRequired[list[Event]]
    eventsMessage: NotRequired[str]


class Problem(TypedDict):
    path: str
    message: str


class PlacedProblem(Problem):
    field: str  # the Lab form's field the problem is about ("" for the job as a whole)


class Validation(TypedDict):
    """``POST pai/api/validate``."""

    valid: bool
    problems: list[PlacedProblem]
    refused: NotRequired[bool]  # a valid job the cluster would not take
    id: NotRequired[str]  # submitted
    name: NotRequired[str]  # valid, not submitted


class FormImport(TypedDict, total=False):
    """``POST pai/api/form/import``: the document as the form's v1 JSON, or why not."""

    doc: dict[str, Any]
    problems: list[PlacedProblem]


class Desktop(TypedDict):
    role: str
    index: int
    state: str
    url: str


class JobAccess(TypedDict):
    """``GET pai/api/jobs/{user}~{name}/access``."""

    sshKey: str | None
    desktops: list[Desktop]
    message: str | None


class MaxRunTime(TypedDict):
    """``PUT pai/api/jobs/{user}~{name}/maxRunTime``."""

    id: str
    minutes: float
    deadline: float | None  # epoch seconds


class ProfileInfo(TypedDict):
    name: str
    url: str
    username: str
    default: bool
    current: bool


class ProfileList(TypedDict):
    """``GET pai/api/profiles``."""

    current: str
    profiles: list[ProfileInfo]


class ProfileChoice(TypedDict):
    """``PUT pai/api/profiles/current``."""

    current: str
    user: str


class SshTask(TypedDict):
    role: str
    index: int
    state: str
    host: str | None
    port: int | None
    user: str
    key: str | None
    problem: str | None
    ssh: str | None
    pai: str


class SshInfo(TypedDict):
    """``GET pai/api/jobs/{user}~{name}/ssh``."""

    id: str
    tasks: list[SshTask]
    message: str | None


class Resources(TypedDict):
    cpu: float
    memoryMB: float
    gpu: float


class VirtualClusterUse(TypedDict):
    name: str
    used: Resources
    total: Resources


class WaitingJob(TypedDict):
    id: str
    name: str
    virtualCluster: str | None
    reason: str | None


class UsageLine(TypedDict):
    """One user's use of a virtual cluster over the window, or (``username`` None) its total over ``users``."""

    username: str | None
    users: int
    virtualCluster: str
    gpuHoursAllocated: float
    gpuHoursUsed: float | None
    gpuHoursIdle: float | None
    cpuHours: float
    jobsStarted: int
    waitMeanSeconds: float | None


class UsageSummary(TypedDict):
    windowHours: float
    gpuUseMessage: str | None  # why GPU use is unknown, where it is
    rows: list[UsageLine]  # the user's own (an admin's: everyone's), then each virtual cluster's total


class Capacity(TypedDict):
    """``GET pai/api/capacity``."""

    virtualClusters: list[VirtualClusterUse]
    waiting: list[WaitingJob]
    waitingCount: int
    usage: UsageSummary | None  # None: the cluster keeps none (an OpenPAI server)


class QueuedJob(TypedDict):
    job: str
    username: str
    name: str
    ahead: int
    jobPriority: str
    waitingReason: str | None


class WaitingQueue(TypedDict):
    """``GET pai/api/queue``."""

    virtualClusters: dict[str, list[QueuedJob]]
    canReorder: bool


class JobNotification(TypedDict):
    """``GET pai/api/jobs/{user}~{name}/notification``."""

    id: str
    states: list[str]


class BestTrial(TypedDict):
    number: int
    job: str
    value: float


class SweepRow(TypedDict):
    name: str
    status: str | None
    objective: str | None
    mode: str | None
    done: int
    submitted: int
    total: int
    best: BestTrial | None
    updated: int | None


class TrialRow(TypedDict):
    number: int
    job: str
    name: str
    params: dict[str, Any]
    state: str
    value: float | None
    metrics: dict[str, float]


class SweepDetail(SweepRow):
    """``GET pai/api/sweeps/{name}``."""

    params: list[str]
    trials: list[TrialRow]


class SweepsPage(TypedDict):
    """``GET pai/api/sweeps[?sweep=name]``: one refresh of the Sweeps page."""

    sweeps: list[SweepRow]  # the newest first
    sweep: SweepDetail | None  # the one asked for (the newest when none was); null when there is no such sweep
