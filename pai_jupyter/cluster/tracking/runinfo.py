"""What a job's MLflow run says of it: its tags (who, which job, where from) and its params."""

from __future__ import annotations

import json
from typing import Any

from ...protocol import Job
from ...protocol.notebookjob import NOTEBOOK_KEY
from ...protocol.rules import ESTIMATOR_KEY

MAX_PARAM = 6000  # MLflow's limit on a param's value (characters)


def run_tags(user: str, job: Job, origin: dict[str, Any] | None = None) -> dict[str, str]:
    """The tags the platform gives a job's run: who, which job, where, with what image; and where it came from
    (``origin``: the notebook and cell that submitted it, its code's git commit and environment lock), in MLflow's
    own tags where it has them (``mlflow.source.*``, ``mlflow.note.content``) so its UI shows them."""
    origin = origin or {}
    notebook = origin.get("notebook") or notebook_of(job)
    tags = {
        "mlflow.user": user,
        "mlflow.runName": job.name,
        "mlflow.source.type": "NOTEBOOK" if notebook else "JOB",
        "mlflow.source.name": notebook or f"{user}~{job.name}",
        "pai.user": user,
        "pai.job": f"{user}~{job.name}",
        "pai.virtualCluster": job.virtual_cluster,
    }
    image = job.image
    if image:
        tags["pai.image"] = image
    if origin.get("via"):
        tags["pai.submittedVia"] = origin["via"]
    if notebook:
        tags["pai.notebook"] = notebook
    if origin.get("cell"):
        tags["pai.cell"] = origin["cell"]
        tags["mlflow.note.content"] = f"Submitted from {notebook or 'a notebook'}:\n\n```\n{origin['cell']}\n```"
    git = origin.get("git") or {}
    if git.get("commit"):
        tags["mlflow.source.git.commit"] = git["commit"]
        if "dirty" in git:
            tags["pai.git.dirty"] = "true" if git["dirty"] else "false"
    if origin.get("envLock"):
        tags["pai.envLock"] = origin["envLock"]
    return tags


def run_params(job: Job) -> dict[str, Any]:
    """The run's params: the job's ``parameters``, an Estimator's hyperparameters and a notebook job's papermill
    parameters (the job's own win where names meet)."""
    out: dict[str, Any] = {}
    for key, field in ((NOTEBOOK_KEY, "parameters"), (ESTIMATOR_KEY, "hyperparameters")):
        spec = job.extras.get(key)
        if isinstance(spec, dict) and isinstance(spec.get(field), dict):
            out.update(spec[field])
    return {**out, **job.parameters}


def notebook_of(job: Job) -> str | None:
    """The notebook a notebook job runs (``pai run-notebook``, the Lab's "Run as PAI job")."""
    spec = job.extras.get(NOTEBOOK_KEY)
    return str(spec["notebook"]) if isinstance(spec, dict) and spec.get("notebook") else None


def param_value(value: Any) -> str:
    return str(value)[:MAX_PARAM]


def sweep_params(state: dict[str, Any]) -> dict[str, Any]:
    """A sweep's parent run's params: how it searches (its stored state) and its space, one param per dimension."""
    keys = ("search", "objective", "mode", "max_trials", "concurrency", "seed", "prune")
    out: dict[str, Any] = {k: state[k] for k in keys if state.get(k) is not None}
    for name, dimension in (state.get("space") or {}).items():
        out[f"space.{name}"] = json.dumps(dimension, sort_keys=True)
    return out


def sweep_tags(user: str, sweep: str, state: dict[str, Any]) -> dict[str, str]:
    """The parent run's own tags: which sweep, how it searches; with Optuna, the study's sampler and pruner (the
    driver's ``OptunaSearch``: TPE seeded, the median pruner when ``prune``)."""
    tags = {"pai.sweep": f"{user}~{sweep}", "pai.sweep.search": str(state.get("search") or "")}
    if state.get("search") == "optuna":
        tags["pai.optuna.sampler"] = f"TPESampler(seed={state.get('seed', 0)}, n_startup_trials=8)"
        tags["pai.optuna.pruner"] = (
            "MedianPruner(n_startup_trials=5, n_warmup_steps=1)" if state.get("prune", True) else "NopPruner()"
        )
        tags["pai.optuna.direction"] = "minimize" if state.get("mode", "min") == "min" else "maximize"
    return tags
