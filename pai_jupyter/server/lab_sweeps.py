"""The Lab's Sweeps page (docs/sweeps.md), through the profile's client: the user's own sweeps only (the daemon's
sweep routes answer for the caller's user).

- ``GET pai/api/sweeps``: ``{"sweeps": [{name, status, objective, mode, done, total, submitted, best, updated}]}``,
  where ``best`` is ``{number, job, value}`` of the best succeeded trial (``common/sweepstate.py``) or null.
- ``GET pai/api/sweeps/{name}``: the sweep with its trials ``[{number, job, name, params, state, value, metrics}]``.
  The stored state is what the driver last wrote; a trial still live is read from the cluster as well (its job's
  state and its reports so far), so the page moves while the trial runs, whether or not a driver is writing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tornado import web

from ..client import JobNotFound, PaiError
from ..common.sweepstate import ENDED, best_trial
from .lab_base import LabHandler

NAME_RE = r"(?P<name>[A-Za-z0-9_-]{1,100})"  # a sweep's name (the daemon's rule)


def _done(state: dict[str, Any]) -> int:
    return sum(1 for t in state.get("trials") or [] if t.get("state") in ENDED)


def summary(name: str, updated: Any, state: dict[str, Any]) -> dict[str, Any]:
    """One row of the sweeps list."""
    best = best_trial(state)
    trials = state.get("trials") or []
    return {
        "name": name,
        "status": state.get("status"),
        "objective": state.get("objective"),
        "mode": state.get("mode"),
        "done": _done(state),
        "submitted": len(trials),
        "total": state.get("max_trials") or len(trials),
        "best": {"number": best["number"], "job": best["job"], "value": best["value"]} if best else None,
        "updated": updated,
    }


class SweepsHandler(LabHandler):
    @web.authenticated
    async def get(self) -> None:
        listed = await self.call("the sweeps", self.client.list_sweeps())
        records = await asyncio.gather(*(self.client.sweep_state(s["name"]) for s in listed), return_exceptions=True)
        rows = []
        for r in records:
            if isinstance(r, JobNotFound):  # deleted since the list was read: left out
                continue
            if isinstance(r, PaiError):
                raise self.failure("a sweep", r)
            if isinstance(r, BaseException):
                raise r
            rows.append(summary(r["name"], r.get("updated"), r.get("state") or {}))
        rows.sort(key=lambda r: r["updated"] or 0, reverse=True)
        self.send({"sweeps": rows})


class SweepHandler(LabHandler):
    @web.authenticated
    async def get(self, name: str) -> None:
        record = await self.call(f"sweep {name}", self.client.sweep_state(name))
        state = dict(record.get("state") or {})
        trials = [dict(t) for t in state.get("trials") or []]
        await asyncio.gather(*(self.live(t, state.get("objective")) for t in trials if t.get("state") not in ENDED))
        state["trials"] = trials
        self.send(
            {
                **summary(name, record.get("updated"), state),
                "params": sorted(state.get("space") or {}),
                "trials": [
                    {
                        "number": t.get("number"),
                        "job": t.get("job"),
                        "name": str(t.get("job") or "").partition("~")[2],
                        "params": t.get("params") or {},
                        "state": t.get("state"),
                        "value": t.get("value"),
                        "metrics": t.get("metrics") or {},
                    }
                    for t in trials
                ],
            }
        )

    async def live(self, trial: dict[str, Any], objective: Any) -> None:
        """A live trial as the cluster has it now: its job's state, and its metrics folded over its reports."""
        job = str(trial.get("job") or "")
        try:
            detail, reports = await asyncio.gather(self.client.detail(job), self.client.reports(job))
        except PaiError as exc:  # deleted, or the cluster is busy: the stored state stands
            self.log.info("pai: trial %s: %s", job, exc)
            return
        metrics = dict(trial.get("metrics") or {})
        for report in reports:
            metrics.update(report.get("metrics") or {})
        trial["metrics"] = metrics
        if objective in metrics:
            trial["value"] = metrics[objective]
        if detail.state not in ENDED:  # an ended job is the driver's to judge (succeeded, failed or pruned)
            trial["state"] = detail.state


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [
        (pai + "/api/sweeps", SweepsHandler, args),
        (pai + "/api/sweeps/" + NAME_RE, SweepHandler, args),
    ]
