"""The Lab's Sweeps page (docs/sweeps.md), through the profile's client: the user's own sweeps only (the daemon's
sweep routes answer for the caller's user).

- ``GET pai/api/sweeps[?sweep=name]``: what one refresh of the page shows (``SweepsPage``): the user's sweeps,
  newest first, each ``{name, status, objective, mode, done, total, submitted, best, updated}`` (``best``: the best
  succeeded trial, ``common/sweepstate.py``), and the sweep asked for (the newest when none is) with its trials.
- ``GET pai/api/sweeps/{name}``: one sweep with its trials ``[{number, job, name, params, state, value, metrics}]``.

The stored state is what the driver last wrote; a trial still live is read from the cluster as well (its job's
state and its reports so far), so the page moves while the trial runs, whether or not a driver is writing. A
refresh costs three daemon requests however many sweeps and live trials there are: the sweeps with their states,
the user's live jobs (``jobs_with_tasks``) and the live trials' reports (``reports_of``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tornado import web

from ..client import AsyncClient, PaiError, SweepRecord
from ..common.states import FINAL, JobState
from ..common.sweepstate import ENDED, best_trial
from .answers import BestTrial, SweepDetail, SweepRow, SweepsPage, TrialRow
from .lab_base import LabHandler

NAME_RE = r"(?P<name>[A-Za-z0-9_-]{1,100})"  # a sweep's name (the daemon's rule)
LIVE = sorted(s.value for s in JobState if s.value not in FINAL)  # a trial's job the cluster has not ended


def _done(state: dict[str, Any]) -> int:
    return sum(1 for t in state.get("trials") or [] if t.get("state") in ENDED)


def summary(name: str, updated: Any, state: dict[str, Any]) -> SweepRow:
    """One row of the sweeps list."""
    found = best_trial(state)
    trials = state.get("trials") or []
    best: BestTrial | None = (
        {"number": found["number"], "job": found["job"], "value": found["value"]} if found else None
    )
    return {
        "name": name,
        "status": state.get("status"),
        "objective": state.get("objective"),
        "mode": state.get("mode"),
        "done": _done(state),
        "submitted": len(trials),
        "total": state.get("max_trials") or len(trials),
        "best": best,
        "updated": updated,
    }


async def live_trials(client: AsyncClient, trials: list[dict[str, Any]], objective: Any, log: logging.Logger) -> None:
    """Each trial the stored state has not ended, as the cluster has it now: its job's state, and its metrics
    folded over its reports (two requests for all of them)."""
    live = [t for t in trials if t.get("state") not in ENDED and t.get("job")]
    if not live:
        return
    try:
        jobs, reports = await asyncio.gather(
            client.jobs_with_tasks(state=LIVE), client.reports_of([str(t["job"]) for t in live])
        )
    except PaiError as exc:  # the cluster is busy: the stored state stands
        log.info("pai: the live trials: %s", exc)
        return
    states = {j.id: j.state for j in jobs}
    for trial in live:
        job = str(trial["job"])
        metrics = dict(trial.get("metrics") or {})
        for report in reports.get(job, []):
            metrics.update(report.metrics)
        trial["metrics"] = metrics
        if objective in metrics:
            trial["value"] = metrics[objective]
        if job in states:  # an ended job is the driver's to judge (succeeded, failed or pruned)
            trial["state"] = states[job]


async def sweep_detail(client: AsyncClient, record: SweepRecord, log: logging.Logger) -> SweepDetail:
    """A sweep's stored record with its live trials read from the cluster."""
    state = dict(record.state or {})
    trials = [dict(t) for t in state.get("trials") or []]
    await live_trials(client, trials, state.get("objective"), log)
    state["trials"] = trials
    rows: list[TrialRow] = [
        {
            "number": int(t.get("number") or 0),
            "job": str(t.get("job") or ""),
            "name": str(t.get("job") or "").partition("~")[2],
            "params": t.get("params") or {},
            "state": str(t.get("state") or ""),
            "value": t.get("value"),
            "metrics": t.get("metrics") or {},
        }
        for t in trials
    ]
    return {
        **summary(record.name, record.updated, state),
        "params": sorted(state.get("space") or {}),
        "trials": rows,
    }


async def sweeps_page(client: AsyncClient, wanted: str, log: logging.Logger) -> SweepsPage:
    """The user's sweeps, newest first, and the one wanted (the newest when none is) with its trials."""
    records = sorted(await client.list_sweeps(with_state=True), key=lambda r: r.updated or 0, reverse=True)
    rows = [summary(r.name, r.updated, r.state or {}) for r in records]
    pick = wanted or (records[0].name if records else "")
    record = next((r for r in records if r.name == pick), None)
    return {"sweeps": rows, "sweep": await sweep_detail(client, record, log) if record else None}


class SweepsHandler(LabHandler):
    @web.authenticated
    async def get(self) -> None:
        wanted = self.get_argument("sweep", "")
        self.send(await self.call("the sweeps", sweeps_page(self.client, wanted, self.log)))


class SweepHandler(LabHandler):
    @web.authenticated
    async def get(self, name: str) -> None:
        record = await self.call(f"sweep {name}", self.client.sweep_state(name))
        self.send(await sweep_detail(self.client, record, self.log))


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [
        (pai + "/api/sweeps", SweepsHandler, args),
        (pai + "/api/sweeps/" + NAME_RE, SweepHandler, args),
    ]
