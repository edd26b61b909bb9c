"""Typed results: JobSummary (a list row), JobDetail with TaskStatus rows, ListedJob (a row with its tasks);
DataFrames and escaped HTML."""

from __future__ import annotations

import html
import warnings
from datetime import datetime, timezone
from typing import Any, ClassVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from ..common.format import fmt
from ..common.states import FINAL, JobState

FINAL_STATES = FINAL  # kept under its public name (pai_jupyter.client.FINAL_STATES)


def _time(value: Any) -> datetime | None:
    """OpenPAI sends epoch milliseconds (or null); some servers send ISO strings."""
    if value in (None, "", 0):
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return value if isinstance(value, datetime) else None


class _Api(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow", frozen=True)

    def _named(self, key: str) -> tuple[str, Any]:
        """The attribute behind wire name (or attribute) ``key`` and its value; KeyError when there is none."""
        for name, info in type(self).model_fields.items():
            if key in (name, info.alias):
                return name, getattr(self, name)
        extra = self.model_extra or {}
        if key in extra:
            return key, extra[key]
        raise KeyError(key)

    def __getitem__(self, key: str) -> Any:
        """Answers were dicts before they were models (``client.info()["capacity"]``): a notebook that reads them
        so keeps working, told by a DeprecationWarning which attribute to read instead."""
        name, value = self._named(key)
        warnings.warn(f"{type(self).__name__}[{key!r}] is deprecated: read .{name}", DeprecationWarning, stacklevel=2)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """``dict.get`` for code written when answers were dicts (deprecated, as ``[key]``)."""
        try:
            name, value = self._named(key)
        except KeyError:
            return default
        warnings.warn(
            f"{type(self).__name__}.get({key!r}) is deprecated: read .{name}", DeprecationWarning, stacklevel=2
        )
        return value

    @field_validator("*", mode="before")
    @classmethod
    def _times(cls, value: Any, info: Any) -> Any:
        if info.field_name.endswith("_time"):
            return _time(value)
        return value


def _html_table(columns: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _duration(start: datetime | None, end: datetime | None) -> float | None:
    if start is None:
        return None
    return ((end or datetime.now(timezone.utc)) - start).total_seconds()


class JobSummary(_Api):
    """One row of the job list (OpenPAI's list item)."""

    name: str
    username: str
    state: str
    sub_state: str | None = Field(None, alias="subState")
    execution_type: str | None = Field(None, alias="executionType")
    retries: int = 0
    submission_time: datetime | None = Field(None, alias="submissionTime")
    created_time: datetime | None = Field(None, alias="createdTime")
    launched_time: datetime | None = Field(None, alias="launchedTime")
    completed_time: datetime | None = Field(None, alias="completedTime")
    app_exit_code: int | None = Field(None, alias="appExitCode")
    virtual_cluster: str | None = Field(None, alias="virtualCluster")
    total_gpu_number: int = Field(0, alias="totalGpuNumber")
    total_task_number: int = Field(0, alias="totalTaskNumber")
    total_task_role_number: int = Field(0, alias="totalTaskRoleNumber")
    tags: list[str] | None = None  # (OpenPAI's list items have them; a sweep's trials are tagged sweep:NAME)

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "id",
        "state",
        "submission_time",
        "duration_s",
        "virtual_cluster",
        "retries",
        "total_task_number",
        "total_gpu_number",
        "app_exit_code",
    )

    @property
    def id(self) -> str:
        return f"{self.username}~{self.name}"

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def duration_s(self) -> float | None:
        return _duration(self.launched_time, self.completed_time)

    def row(self) -> list[Any]:
        return [getattr(self, c) for c in self.COLUMNS]

    def _repr_html_(self) -> str:
        return _html_table(list(self.COLUMNS), [self.row()])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, state={self.state!r})"


class JobList(list[JobSummary]):
    """A list of JobSummary that shows as a table and turns into a DataFrame."""

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([j.row() for j in self], columns=list(JobSummary.COLUMNS))

    def _repr_html_(self) -> str:
        return _html_table(list(JobSummary.COLUMNS), [j.row() for j in self])


class TaskStatus(_Api):
    role: str = ""
    task_index: int = Field(alias="taskIndex")
    task_state: str = Field(alias="taskState")
    container_id: str | None = Field(None, alias="containerId")
    container_ip: str | None = Field(None, alias="containerIp")
    container_ports: dict[str, Any] = Field(default_factory=dict, alias="containerPorts")
    container_gpus: Any = Field(None, alias="containerGpus")
    container_exit_code: int | None = Field(None, alias="containerExitCode")
    container_exit_diagnostics: str | None = Field(None, alias="containerExitDiagnostics")
    container_exit_spec: dict[str, Any] | None = Field(None, alias="containerExitSpec")
    retries: int = 0
    created_time: datetime | None = Field(None, alias="createdTime")
    launched_time: datetime | None = Field(None, alias="launchedTime")
    completed_time: datetime | None = Field(None, alias="completedTime")
    attempt_id: int | None = Field(None, alias="attemptId")
    task_attempt_id: int | None = Field(None, validation_alias=AliasChoices("taskAttemptId", "retries"))
    container_log: str | None = Field(None, alias="containerLog")

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "role",
        "task_index",
        "task_state",
        "container_ip",
        "ports",
        "container_exit_code",
        "container_exit_diagnostics",
    )

    @property
    def ports(self) -> str:
        return " ".join(f"{k}:{v}" for k, v in (self.container_ports or {}).items())

    def row(self) -> list[Any]:
        return [getattr(self, c) for c in self.COLUMNS]

    def __repr__(self) -> str:
        return f"TaskStatus({self.role}[{self.task_index}], state={self.task_state!r}, exit={self.container_exit_code})"


class ServiceState(_Api):
    """One of a task's services as the embedded cluster's job list gives it (``Client.jobs_with_tasks``)."""

    name: str
    state: str
    message: str | None = None


class ListedTask(TaskStatus):
    """A task with its services' states (``Client.jobs_with_tasks``)."""

    services: list[ServiceState] = Field(default_factory=list)


class ListedJob(JobSummary):
    """A list row with, on a live job, its current attempt's tasks (``Client.jobs_with_tasks``; None: not given,
    the job has ended)."""

    tasks: list[ListedTask] | None = None


class JobStatus(JobSummary):
    attempt_id: int | None = Field(None, alias="attemptId")
    app_exit_diagnostics: str | None = Field(None, alias="appExitDiagnostics")
    app_exit_spec: dict[str, Any] | None = Field(None, alias="appExitSpec")
    app_exit_trigger_task_role_name: str | None = Field(None, alias="appExitTriggerTaskRoleName")
    app_exit_trigger_task_index: int | None = Field(None, alias="appExitTriggerTaskIndex")
    waiting_reason: str | None = Field(None, alias="waitingReason")
    mlflow_run_id: str | None = Field(None, alias="mlflowRunId")  # the job's MLflow run (embedded cluster)
    mlflow_experiment_id: str | None = Field(None, alias="mlflowExperimentId")


class JobDetail(_Api):
    """A job's status with one TaskStatus per task (OpenPAI's job detail)."""

    name: str
    job_status: JobStatus = Field(alias="jobStatus")
    tasks: list[TaskStatus] = Field(default_factory=list)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> JobDetail:
        tasks = []
        for role, info in (data.get("taskRoles") or {}).items():
            for t in (info or {}).get("taskStatuses") or []:
                tasks.append(TaskStatus.model_validate({**t, "role": role}))
        status = {"name": data.get("name"), **(data.get("jobStatus") or {})}
        return cls.model_validate({"name": data.get("name"), "jobStatus": status, "tasks": tasks})

    @property
    def id(self) -> str:
        return self.job_status.id

    @property
    def state(self) -> str:
        return self.job_status.state

    @property
    def is_final(self) -> bool:
        return self.job_status.is_final

    @property
    def exit_code(self) -> int | None:
        return self.job_status.app_exit_code

    def role_tasks(self, role: str) -> list[TaskStatus]:
        return [t for t in self.tasks if t.role == role]

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([t.row() for t in self.tasks], columns=list(TaskStatus.COLUMNS))

    def _repr_html_(self) -> str:
        s = self.job_status
        head = (
            f"<p><b>{html.escape(self.id)}</b>: {html.escape(s.state)}"
            + (f" — {html.escape(s.waiting_reason)}" if s.waiting_reason and s.state == JobState.WAITING else "")
            + (f" — exit {s.app_exit_code}" if s.app_exit_code is not None else "")
            + "</p>"
        )
        return head + _html_table(list(TaskStatus.COLUMNS), [t.row() for t in self.tasks])

    def __repr__(self) -> str:
        return f"JobDetail({self.id!r}, state={self.state!r}, tasks={len(self.tasks)})"


class UsageFigures(_Api):
    """One user's use of one virtual cluster over the window (``username`` None: the virtual cluster's total over
    every user, ``users`` of them). GPU-hours used and idle are None where the cluster does not sample GPU use."""

    virtual_cluster: str = Field(alias="virtualCluster")
    username: str | None = None
    users: int | None = None
    gpu_hours_allocated: float = Field(0.0, alias="gpuHoursAllocated")
    gpu_hours_used: float | None = Field(None, alias="gpuHoursUsed")
    gpu_hours_idle: float | None = Field(None, alias="gpuHoursIdle")
    cpu_hours: float = Field(0.0, alias="cpuHours")
    memory_gb_hours: float = Field(0.0, alias="memoryGBHours")
    jobs_started: int = Field(0, alias="jobsStarted")
    attempts_started: int = Field(0, alias="attemptsStarted")
    wait_mean_s: float | None = Field(None, alias="waitMeanSeconds")
    wait_max_s: float | None = Field(None, alias="waitMaxSeconds")
    fair_share_usage: float | None = Field(None, alias="fairShareUsage")

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "username",
        "virtual_cluster",
        "gpu_hours_allocated",
        "gpu_hours_used",
        "gpu_hours_idle",
        "cpu_hours",
        "memory_gb_hours",
        "jobs_started",
        "wait_mean_s",
        "wait_max_s",
        "fair_share_usage",
    )

    def row(self) -> list[Any]:
        return [getattr(self, c) for c in self.COLUMNS]


class Usage(_Api):
    """``Client.usage``: the rows the caller may see (their own; an admin everyone's) and every virtual cluster's
    totals, over the last ``window_hours``."""

    window_hours: float = Field(alias="windowHours")
    since: datetime | None = None
    now: datetime | None = None
    all_users: bool = Field(False, alias="allUsers")
    gpu_use: dict[str, Any] = Field(default_factory=dict, alias="gpuUse")
    fair_share: dict[str, Any] = Field(default_factory=dict, alias="fairShare")  # halfLifeHours (None: off)
    rows: list[UsageFigures] = Field(default_factory=list)
    virtual_clusters: list[UsageFigures] = Field(default_factory=list, alias="virtualClusters")

    @field_validator("since", "now", mode="before")
    @classmethod
    def _ms(cls, value: Any) -> Any:
        return _time(value)

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([r.row() for r in self.rows], columns=list(UsageFigures.COLUMNS))

    def _repr_html_(self) -> str:
        return _html_table(list(UsageFigures.COLUMNS), [r.row() for r in self.rows])


# ---- the other answers -------------------------------------------------------------------------------------------
# Every public call answers a model, never a bare dict: a field the daemon renames fails in one place (here), not
# at each reader. Those that are OpenPAI's wire shape (info, attempts, events) keep whatever else the server sends
# (``extra="allow"``, as every _Api model), so nothing is lost for a caller that wants it (``model_extra``).


class ServerInfo(_Api):
    """``/api/v2/info``: OpenPAI's public fields; with a token the embedded cluster adds its capacity, runtime, the
    caller's name and whether they are an admin, and ``local`` (its local-only routes: see ``client.locality``)."""

    name: str | None = None
    version: str | None = None
    launcher_type: str | None = Field(None, alias="launcherType")
    authn_method: str | None = Field(None, alias="authnMethod")
    cluster: str | None = None
    runtime: Any = None
    capacity: dict[str, Any] | None = None
    used: dict[str, Any] | None = None
    virtual_clusters: dict[str, dict[str, Any]] | None = Field(None, alias="virtualClusters")
    user: str | None = None
    admin: bool = False
    local: dict[str, Any] | None = None


class JobAttempt(_Api):
    """One of a job's attempts (OpenPAI's job-attempts item; its other fields kept as extras)."""

    attempt_index: int = Field(0, alias="attemptIndex")
    state: str | None = None
    is_latest: bool = Field(False, alias="isLatest")
    exit_code: int | None = Field(None, alias="exitCode")
    exit_diagnostics: dict[str, Any] | str | None = Field(None, alias="exitDiagnostics")  # (a summary, or its text)
    task_roles: dict[str, Any] = Field(default_factory=dict, alias="taskRoles")


class JobEvent(_Api):
    """One of the job's events (OpenPAI's FrameworkEvent): ``type``, ``reason``, ``message``, and the ISO
    ``first_timestamp`` / ``last_timestamp`` it happened."""

    type: str | None = None
    reason: str | None = None
    message: str | None = None
    first_timestamp: str | None = Field(None, alias="firstTimestamp")
    last_timestamp: str | None = Field(None, alias="lastTimestamp")

    @property
    def time(self) -> str | None:
        """When it last happened."""
        return self.last_timestamp or self.first_timestamp


class TaskService(_Api):
    """A service running inside a task (``Client.services``): where it listens, its state and token; a
    TensorBoard's ``logdir`` as the task sees it; ``message``: why it is not running, where it is not."""

    role: str
    index: int
    name: str
    host: str = "127.0.0.1"
    port: int
    state: str
    token: str | None = None
    base_path: str = Field("/", alias="basePath")
    message: str | None = None
    logdir: str | None = None


class ServiceAction(_Api):
    """``Client.service_action``'s receipt: the action asked of the service."""

    role: str
    index: int
    name: str
    action: str


class GpuSample(_Api):
    index: int
    utilization_percent: float | None = Field(None, alias="utilizationPercent")
    memory_used_bytes: int | None = Field(None, alias="memoryUsedBytes")
    memory_total_bytes: int | None = Field(None, alias="memoryTotalBytes")


class TaskMetrics(_Api):
    """One task's CPU % (None until two samples span the window), memory and GPUs."""

    role: str
    index: int
    state: str
    cpu_percent: float | None = Field(None, alias="cpuPercent")
    memory_bytes: int | None = Field(None, alias="memoryBytes")
    memory_limit_bytes: int | None = Field(None, alias="memoryLimitBytes")
    gpus: list[GpuSample] = Field(default_factory=list)


class GpuSampling(_Api):
    available: bool = False
    message: str | None = None


class JobMetrics(_Api):
    """``Client.metrics``: one snapshot (``time`` in epoch ms) of each task's use, and whether GPUs are sampled."""

    time: int = 0
    gpu: GpuSampling = Field(default_factory=GpuSampling)
    tasks: list[TaskMetrics] = Field(default_factory=list)


class Tracking(_Api):
    """``Client.tracking``: the MLflow server the user's jobs are runs of, their experiment, and their own
    credentials (no ``password`` where the server has no accounts)."""

    url: str
    experiment: str
    experiment_id: str | None = Field(None, alias="experimentId")
    username: str | None = None
    password: str | None = None


class QueuedJob(_Api):
    """A waiting job in its virtual cluster's line: ``ahead`` of it, its class, why it waits, and the start the
    plan reserved (``start_estimate``, epoch ms) or the batch system holding it (``held_by``)."""

    job: str
    username: str
    name: str
    ahead: int
    job_priority: str = Field("default", alias="jobPriority")
    waiting_reason: str | None = Field(None, alias="waitingReason")
    submission_time: datetime | None = Field(None, alias="submissionTime")
    start_estimate: int | None = Field(None, alias="startEstimate")
    fair_share_usage: float | None = Field(None, alias="fairShareUsage")
    held_by: str | None = Field(None, alias="heldBy")


class WaitingQueue(_Api):
    """``Client.waiting_queue``: each virtual cluster's line, in order; whether the caller may reorder them."""

    virtual_clusters: dict[str, list[QueuedJob]] = Field(default_factory=dict, alias="virtualClusters")
    can_reorder: bool = Field(False, alias="canReorder")
    limit: int | None = None

    def find(self, job: str) -> QueuedJob | None:
        """The job's entry, if it is queued."""
        return next((j for line in self.virtual_clusters.values() for j in line if j.job == job), None)


class PriorityChange(_Api):
    """``Client.set_priority``: the job's class now, and how many jobs are ahead of it (None: it is not waiting)."""

    message: str | None = None
    job_priority: str = Field("default", alias="jobPriority")
    ahead: int | None = None


class MaxRunTimeChange(_Api):
    """``Client.set_max_run_time``: the minutes set, and the deadline they make (epoch seconds; None: the job is not
    running)."""

    message: str | None = None
    minutes: float
    deadline: float | None = None


class LeaseRenewal(_Api):
    """``Client.renew_lease``: the lease's length and when it now lapses (epoch seconds)."""

    seconds: float
    expires: float


class Report(_Api):
    """One report of a job (``pai_jupyter.report``): when (epoch ms), its step, its metrics, and where it came from
    (``api``, ``file``, ``tensorboard:...``)."""

    time: int | None = None
    step: int | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    source: str | None = None


class SweepRecord(_Api):
    """A sweep as the cluster stores it (``Client.sweep_state``, ``list_sweeps``): its revision, last write (epoch
    ms), status, number of trials, and its ``state`` document (None in a list asked without states)."""

    user: str
    name: str
    revision: int = 0
    updated: int | None = None
    status: str | None = None
    trials: int = 0
    state: dict[str, Any] | None = None
