"""Typed results: JobSummary (a list row), JobDetail with TaskStatus rows, ListedJob (a row with its tasks);
DataFrames and escaped HTML."""

from __future__ import annotations

import html
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
