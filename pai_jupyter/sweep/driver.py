"""``Sweep``: trials of a job template (or an Estimator) as ordinary jobs, driven from the kernel.

Where the driver runs, and why: in the process that calls ``run()`` (the kernel, or a thread of it with
``start()``), not in the daemon. Everything it knows lives in the cluster instead: the sweep's state document
(the template, the search space and settings, every trial with its job, parameters, state, metrics and the
objective's intermediate values) is written to ``/api/v2/local/sweeps/{user}~{name}`` after each change, and the
trials are jobs tagged ``sweep:{name}``. So a kernel that dies (or another notebook) calls ``Sweep.attach(name)``
and ``run()`` again: the trials that ran on meanwhile are picked up, grid and random continue by trial number and
Optuna is told the finished trials again. Two drivers of one sweep cannot both write: each write names the
revision it read, and the one that lost (409) stops with ``SweepTaken``. The daemon stays free of user code and
of optional libraries (Optuna), and the same driver runs against any profile with the sweep routes.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..client import Client
from ..client.errors import JobConflict, JobNotFound
from ..client.models import Report, SweepRecord
from ..common.states import FINAL
from ..common.sweepstate import ENDED, FINISHED, PRUNED, best_trial
from ..protocol import Job
from ..protocol.edit import rename_text, with_parameters
from ..protocol.parse import dump_yaml, load_document
from ..protocol.rules import ESTIMATOR_KEY
from .search import Search, make_search, search_size
from .space import Space, check_space, space_from_dict, space_to_dict
from .writer import STOPS, SweepTaken, Writer


def _template_text(template: Any) -> str:
    """The v2 YAML of a template: YAML/JSON text, a file, a Job, or an Estimator (its job, base hyperparameters)."""
    if hasattr(template, "build_job"):  # an Estimator (duck-typed: the sdk is a surface of its own)
        return str(template.build_job(job_name="sweep-trial").to_yaml())
    if isinstance(template, Job):
        return template.to_yaml()
    if isinstance(template, Path) or (isinstance(template, str) and "\n" not in template and Path(template).is_file()):
        return Path(template).read_text()
    if isinstance(template, str):
        return template
    raise TypeError("a template is job YAML/JSON text, a file, a Job or an Estimator")


def trial_job(template: str, name: str, params: Mapping[str, Any]) -> str:
    """The trial's job: the template renamed, its parameters set (the cluster renders ``<% $parameters.x %>``), and
    an Estimator job's hyperparameters too."""
    text = with_parameters(rename_text(template, name), dict(params))
    doc = load_document(text)
    spec = (doc.get("extras") or {}).get(ESTIMATOR_KEY)
    if not isinstance(spec, dict):
        return text
    spec["hyperparameters"] = {**(spec.get("hyperparameters") or {}), **params}
    return dump_yaml(doc)


class Sweep:
    """A hyperparameter sweep whose trials are jobs. ``space``: ``{name: choice(...) | uniform(a, b) |
    loguniform(a, b) | randint(a, b)}``; ``search``: ``grid`` (``points`` values per continuous parameter),
    ``random`` or ``optuna``; the objective is the last value of the metric ``objective`` a trial reported
    (``pai_jupyter.report``), minimised or maximised (``mode``)."""

    def __init__(
        self,
        name: str,
        template: Any,
        space: Mapping[str, Any],
        *,
        objective: str = "loss",
        mode: str = "min",
        search: str = "grid",
        max_trials: int | None = None,
        concurrency: int = 2,
        points: int = 3,
        seed: int = 0,
        prune: bool = True,
        client: Client | None = None,
        profile: str | None = None,
        poll: float = 0.2,
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode is min or max, got {mode!r}")
        if concurrency < 1:
            raise ValueError("concurrency is at least 1")
        checked = check_space(space)
        size = search_size(search, checked, points)
        if max_trials is None and size is None:
            raise ValueError(f"search={search!r} needs max_trials")
        self.client = client or Client(profile)
        self.name = name
        self.poll = poll
        try:
            self.client.sweep_state(name)
        except JobNotFound:
            pass
        else:
            raise ValueError(f"sweep {name} exists: Sweep.attach({name!r}) resumes it (or client.delete_sweep it)")
        self.state: dict[str, Any] = {
            "status": "new",
            "template": _template_text(template),
            "space": space_to_dict(checked),
            "objective": objective,
            "mode": mode,
            "search": search,
            "max_trials": min(x for x in (max_trials, size) if x is not None),
            "concurrency": concurrency,
            "points": points,
            "seed": seed,
            "prune": prune,
            "created": time.time(),
            "trials": [],
        }
        self._setup()

    def _setup(self) -> None:
        self.driver = uuid.uuid4().hex[:12]
        self._search: Search | None = None
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._last_reports: dict[int, float] = {}
        self._stop_checked = 0.0
        self._moved = False
        self._writer = Writer(self.client, self.name, 0)
        self.listeners: list[Callable[[Sweep], None]] = []
        self.error: BaseException | None = None

    @classmethod
    def attach(cls, name: str, *, client: Client | None = None, profile: str | None = None) -> Sweep:
        """The sweep ``name`` as the cluster holds it; ``run()``/``start()`` resumes it here."""
        self = cls.__new__(cls)
        self.client = client or Client(profile)
        self.name = name
        self.poll = 0.2
        self._setup()
        self.refresh()
        return self

    # ---- state ----------------------------------------------------------------------------------------------
    @property
    def space(self) -> Space:
        return space_from_dict(self.state["space"])

    @property
    def trials(self) -> list[dict[str, Any]]:
        return list(self.state["trials"])

    @property
    def status(self) -> str:
        return str(self.state["status"])

    @property
    def revision(self) -> int:
        """The stored revision this driver's last write made (or its last read)."""
        return self._writer.revision

    def refresh(self) -> Sweep:
        """Read the stored state (what another driver wrote)."""
        record = self.client.sweep_state(self.name)
        self.state, self._writer.revision = record.state or {}, record.revision
        return self

    def save(self) -> None:
        """Store the state (write-behind: ``writer.py``); the views redraw now."""
        self._writer.save(self.state)
        self._notify()

    def _notify(self) -> None:
        """Tell the views (on the driver's thread); a view that fails never stops the sweep."""
        for listener in list(self.listeners):
            with contextlib.suppress(Exception):
                listener(self)

    # ---- driving --------------------------------------------------------------------------------------------
    def _searcher(self) -> Search:
        if self._search is None:
            s = self.state
            self._search = make_search(
                s["search"],
                self.space,
                mode=s["mode"],
                seed=s["seed"],
                points=s["points"],
                prune=s["prune"],
                trials=s["trials"],
            )
        return self._search

    def _trial_name(self, number: int) -> str:
        return f"{self.name}-{number:04d}"

    def _submit(self, number: int, params: dict[str, Any]) -> dict[str, Any]:
        name = self._trial_name(number)
        try:
            job = self.client.submit(trial_job(self.state["template"], name, params))
        except JobConflict:  # submitted by a driver that stopped before it stored the trial: adopt that job
            job = self.client.job_id(name)
            stored = load_document(self.client.config(job)).get("parameters") or {}
            self._searcher().forget(number)
            params = {k: stored[k] for k in self.state["space"] if k in stored}
        self._writer.tag(job)  # the daemon tags it sweep:{name} as it stores the state
        trial = {
            "number": number,
            "job": job,
            "params": params,
            "state": "SUBMITTED",
            "value": None,
            "metrics": {},
            "intermediate": {},
            "submitted": time.time(),
            "ended": None,
        }
        self.state["trials"].append(trial)
        return trial

    def _update(self, trial: dict[str, Any], reports: list[Report], final: bool) -> bool:
        """Take in a live trial's reports; True when it should be pruned."""
        prune, search = False, self._searcher()
        for r in reports:
            trial["metrics"].update(r.metrics)
            value = r.metrics.get(self.state["objective"])
            if value is None:
                continue
            trial["value"] = value
            if r.step is not None and str(r.step) not in trial["intermediate"]:
                trial["intermediate"][str(r.step)] = value
                if not final and search.intermediate(trial["number"], r.step, value):
                    prune = True
        return prune

    def step(self) -> bool:
        """One round: follow the live trials, submit new ones up to the concurrency; False once the sweep is over."""
        s, changed, shown, stopped_elsewhere = self.state, False, False, False
        self._moved = False  # a trial ended or was submitted: look again at once (run())
        if self._writer.error is not None:
            raise self._writer.error
        if self._writer.remote_status and s["status"] == "running":
            s["status"], changed = self._writer.remote_status, True
        if s.get("driver") != self.driver:
            s["driver"], changed = self.driver, True
        if s["status"] == "new":
            s["status"], changed = "running", True
        following = [t for t in s["trials"] if t["state"] not in ENDED]
        states = {t["job"]: self.client.detail(t["job"]).state for t in following}
        now = time.monotonic()
        # a trial's reports at most once a second, and once more at its end; all of them in one request
        last = self._last_reports
        due = {t["job"] for t in following if states[t["job"]] in FINAL or now - last.get(t["number"], 0) >= 1}
        reports = self.client.reports_of(sorted(due)) if due else {}
        for trial in following:
            state = states[trial["job"]]
            final = state in FINAL
            if trial["job"] in due:
                self._last_reports[trial["number"]] = now
                before = (trial["value"], len(trial["intermediate"]))
                if self._update(trial, reports.get(trial["job"], []), final) and trial.get("stop") is None:
                    trial["stop"] = "pruned"
                    self.client.stop(trial["job"])
                changed |= before != (trial["value"], len(trial["intermediate"]))
            if final:
                stopped_elsewhere |= state == "STOPPED" and trial.get("stop") is None
                pruned = trial.get("stop") == "pruned"
                ok = state == FINISHED and trial["value"] is not None
                trial["state"] = PRUNED if pruned else (FINISHED if ok else ("FAILED" if state == FINISHED else state))
                trial["ended"] = time.time()
                self._searcher().tell(trial)
                changed = self._moved = True
            elif trial["state"] != state:  # waiting -> running: shown now, stored with the next change
                trial["state"], shown = state, True
        live = [t for t in s["trials"] if t["state"] not in ENDED]
        if s["status"] == "running" and len(live) < s["concurrency"] and len(s["trials"]) < s["max_trials"]:
            changed |= self._take_stop_request(stopped_elsewhere)
        if s["status"] == "running":
            while len(live) < s["concurrency"] and len(s["trials"]) < s["max_trials"]:
                params = self._searcher().ask(len(s["trials"]))
                if params is None:
                    break
                live.append(self._submit(len(s["trials"]), params))
                changed = self._moved = True
        if s["status"] == "stopping all":
            for t in live:
                if t.get("stop") is None:
                    t["stop"] = "stopped"
                    self.client.stop(t["job"])
                    changed = True
        if not live and (s["status"] != "running" or len(s["trials"]) >= s["max_trials"]):
            s["status"], changed = "done", True
        if changed:
            self.save()
        elif shown:
            self._notify()
        return s["status"] != "done"

    def _take_stop_request(self, now: bool) -> bool:
        """Before submitting: has a stop been asked for from elsewhere (``stop()`` in another kernel)? Asked at
        most once a second (a stop takes effect within one), and ``now`` when a trial was stopped from elsewhere
        (``stop_all`` stops them itself)."""
        if self.revision == 0:  # not written yet: nobody else knows of it
            return False
        if not now and time.monotonic() - self._stop_checked < 1.0:
            return False
        self._stop_checked = time.monotonic()
        stored = self.client.sweep_state(self.name).state or {}  # (another driver taking over: its writer says so)
        if stored.get("status") in STOPS:
            self.state["status"] = stored["status"]
            return True
        return False

    def run(self, timeout: float | None = None) -> Sweep:
        """Drive the sweep here until it is done (Ctrl-C leaves it resumable: ``attach`` + ``run``)."""
        end = None if timeout is None else time.monotonic() + timeout
        try:
            while self.step():
                if self._halt.is_set() or (end is not None and time.monotonic() > end):
                    break
                if not self._moved:  # nothing happened: wait a poll interval before looking again
                    time.sleep(self.poll)
        finally:
            self._writer.flush()
        return self

    def start(self) -> Sweep:
        """Drive the sweep in a background thread of this kernel (the views update as it goes)."""

        def loop() -> None:
            try:
                self.run()
            except BaseException as exc:  # kept for the views and for wait()
                self.error = exc
                self._notify()

        self._halt.clear()
        self._thread = threading.Thread(target=loop, name=f"sweep-{self.name}", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> Sweep:
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self

    def detach(self) -> None:
        """Stop driving here (the trials run on; the sweep stays resumable)."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join()

    # ---- stopping -------------------------------------------------------------------------------------------
    def _ask(self, status: str) -> None:
        """Ask for a stop: written to the cluster, so the driver (here or in another kernel) takes it."""
        for _ in range(5):
            self.refresh()
            if self.state["status"] == "done":
                return
            self.state["status"] = status
            try:
                self._writer.revision = self.client.put_sweep_state(self.name, self.state, self.revision)
                return
            except JobConflict:
                continue
        raise SweepTaken(f"sweep {self.name} kept changing; try again")

    def stop(self) -> None:
        """Stop early: no new trials; the running ones finish."""
        self._ask("stopping")

    def stop_all(self) -> None:
        """Stop now: no new trials, and the running ones are stopped."""
        self._ask("stopping all")
        if self._thread is None or not self._thread.is_alive():
            for t in self.state["trials"]:
                if t["state"] not in ENDED:
                    self.client.stop(t["job"])

    def stop_trial(self, number: int) -> None:
        """Stop one trial (its job); the sweep goes on."""
        self.client.stop(self.state["trials"][number]["job"])

    # ---- results --------------------------------------------------------------------------------------------
    def best(self) -> dict[str, Any] | None:
        """The succeeded trial with the best objective (None before one)."""
        return best_trial(self.state)

    def model_data(self, trial: Mapping[str, Any] | None = None) -> str:
        """Where the best (or the given) trial's model lies: its ``model`` output (an Estimator trial's)."""
        trial = trial or self.best()
        if trial is None:
            raise RuntimeError(f"sweep {self.name} has no succeeded trial yet")
        dirs = (self.client.detail(trial["job"]).job_status.model_extra or {}).get("outputDirs") or {}
        if "model" not in dirs:
            raise RuntimeError(f"{trial['job']} has no model output (an Estimator trial has one)")
        return str(dirs["model"])

    def frame(self) -> Any:
        """The trials as a pandas DataFrame: number, job, state, value, each parameter and metric."""
        import pandas as pd

        rows = [
            {
                "trial": t["number"],
                "job": t["job"],
                "state": t["state"],
                "value": t["value"],
                **{f"param.{k}": v for k, v in t["params"].items()},
                **{f"metric.{k}": v for k, v in t["metrics"].items()},
            }
            for t in self.state["trials"]
        ]
        return pd.DataFrame(rows)

    def curves(self, trial: Mapping[str, Any]) -> list[Report]:
        """A trial's reports from the cluster."""
        return self.client.reports(trial["job"])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        from .views import SweepView

        display(SweepView(self))


def sweeps(client: Client | None = None) -> list[SweepRecord]:
    """This user's sweeps as the cluster holds them (name, status, trials, updated)."""
    return (client or Client()).list_sweeps()


__all__ = ["JobNotFound", "Sweep", "SweepTaken", "sweeps", "trial_job"]
