"""Every job an MLflow run, with no code change (docs/tracking.md).

At the submission the daemon makes the job's run in its owner's experiment (``pai/<user>``), as MLflow's admin: the
owner's MLflow account first (a password derived from a secret only the daemon keeps, so nothing is stored), their
experiment (made with their credentials: MLflow grants its creator MANAGE on it, and no one else anything), then the
run with the job's tags and its ``parameters`` as params, in state SCHEDULED. Its tasks get ``MLFLOW_TRACKING_URI``,
``MLFLOW_RUN_ID``, ``MLFLOW_EXPERIMENT_ID`` and the owner's credentials, so ``mlflow.log_*`` and ``mlflow.autolog()``
in unchanged code log into that run. The job's states (RUNNING, a retry, its end with the exit code) and what
``pai_jupyter.report()`` sends are written to the run in the background, in order, by one worker: a slow or absent
tracking server never holds up the event loop nor changes a job, and what it refused is logged and recorded as the
job's ``TrackingFailed`` event.

One run per job: a retried attempt goes on in the same run (the curve is not cut; ``pai.attempt`` says which attempt
is running) rather than a run per attempt.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from ...protocol import Job
from ..core.store import JobCore, Store
from ..core.store.tracking import (
    TrackedRun,
    run_of,
    save_user_experiment,
    user_experiment,
)
from . import artifacts, updates
from .artifacts import budget_bytes
from .errors import TrackingError, error_code
from .runinfo import param_value, run_params, run_tags
from .server import Admin

log = logging.getLogger("pai_jupyter.cluster")
TIMEOUT_S = 10.0
SUBMIT_WAIT_S = 15.0  # how long a submission waits for a server still starting (a client gives up after 30 s)
END_STATUS = {"SUCCEEDED": "FINISHED", "FAILED": "FAILED", "STOPPED": "KILLED"}
QUIET_S = 0.05  # an update waits for this long without a job changing state (``_after_the_jobs``)
MAX_DEFER_S = 2.0  # but no longer than this since it was queued
QUEUE_BOUND = 10_000  # updates waiting for the server; past it the oldest are dropped (and said so in the log)


def experiment_name(user: str) -> str:
    return f"pai/{user}"


def user_password(key: bytes, user: str) -> str:
    """``user``'s MLflow password: derived from the daemon's key, never stored; the same after a restart."""
    return hmac.new(key, f"mlflow-user:{user}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class TrackingConfig:
    """Where runs go: ``url`` of the tracking server as the daemon reaches it, ``task_url`` as tasks do, the admin
    account the daemon works as (None: a site's server without authentication, where nobody has an account), the
    secret users' passwords are derived from, and what their MLflow account names start with (``pai-`` on a site's
    server, whose own accounts the platform never touches)."""

    url: str
    task_url: str
    admin: Admin | None
    secret: bytes
    prefix: str = ""


class Tracker:
    """The daemon's side of MLflow: accounts, experiments and runs, and the ordered updates of runs."""

    def __init__(self, store: Store, config: TrackingConfig) -> None:
        self.store, self.config = store, config
        self._http: httpx.AsyncClient | None = None
        self._users: dict[str, str] = {}  # user -> their experiment's id (made or checked once per daemon)
        self._locks: dict[str, asyncio.Lock] = {}
        self._queue: asyncio.Queue[tuple[int, str, dict[str, Any], int]] | None = None
        self._sent = 0  # updates queued so far; per job, the number of its newest status update
        self._newest: dict[int, int] = {}
        self._queued_at: dict[int, float] = {}  # update number -> when it was queued (loop time)
        self._last_change = 0.0  # when a job last changed state (loop time)
        self._worker: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()  # set once the server answered (``wait_ready``)

    # ---- accounts ---------------------------------------------------------------------------------------------
    def account(self, user: str) -> str:
        """``user``'s MLflow account name."""
        return self.config.prefix + user

    def password(self, user: str) -> str:
        return user_password(self.config.secret, self.account(user))

    def credentials(self, user: str) -> dict[str, str]:
        """``user``'s MLflow credentials as MLflow's client reads them; none on a server without authentication."""
        if self.config.admin is None:
            return {}
        return {"MLFLOW_TRACKING_USERNAME": self.account(user), "MLFLOW_TRACKING_PASSWORD": self.password(user)}

    def task_env(self, row: JobCore) -> dict[str, str]:
        """What a task of job ``row`` needs to log into the job's run; {} for a job without one."""
        run = run_of(self.store, row["id"])
        if run is None:
            return {}
        return {
            "MLFLOW_TRACKING_URI": self.config.task_url,
            "MLFLOW_RUN_ID": run.run_id,  # (mlflow's client removes it from the environment once it used it)
            "PAI_MLFLOW_RUN_ID": run.run_id,  # (so pai_jupyter.report() still finds it then)
            "MLFLOW_EXPERIMENT_ID": run.experiment_id,
            **self.credentials(row["user"]),
        }

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=self.config.url,
                auth=(self.config.admin.username, self.config.admin.password) if self.config.admin else None,
                timeout=TIMEOUT_S,
                trust_env=False,
            )
        return self._http

    async def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        as_user: tuple[str, str] | None = None,
        **params: Any,
    ) -> Any:
        """One call of MLflow's REST API, as its admin (or ``as_user``: (name, password))."""
        auth = httpx.BasicAuth(*as_user) if as_user else httpx.USE_CLIENT_DEFAULT
        r = await self.http.request(method, f"/api/2.0/mlflow/{path}", json=body, params=params or None, auth=auth)
        if r.status_code >= 400:
            raise TrackingError(r.status_code, error_code(r), r.text[:300])
        return r.json() if r.content else {}

    async def moved(self, url: str) -> None:
        """The server was started again (it had exited) at ``url``: ask there from now on."""
        self.ready.clear()
        if url != self.config.url:
            self.config = replace(self.config, url=url, task_url=url)
            if self._http is not None:
                await self._http.aclose()
                self._http = None

    async def wait_ready(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for the server to answer; True once it has."""
        deadline = time.monotonic() + timeout
        while not self.ready.is_set():
            try:
                if (await self.http.get("/health", timeout=2.0)).status_code == 200:
                    self.ready.set()
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    async def experiment_of(self, user: str) -> str:
        """The id of ``user``'s experiment (``pai/<user>``, theirs alone), with their account made first; one at a
        time per user (a sweep's first trials come together)."""
        if user in self._users:
            return self._users[user]
        async with self._locks.setdefault(user, asyncio.Lock()):
            if user not in self._users:
                self._users[user] = await self._make_experiment(user)
        return self._users[user]

    async def _make_experiment(self, user: str) -> str:
        """The user's account (where the server has accounts), then their experiment: the one recorded as theirs,
        else a new one made as them (MLflow gives its creator MANAGE on it). A name someone else took first (any
        account may make an experiment called ``pai/<user>``, and would then read what is logged there) is never
        used: the new one gets a suffix."""
        account = self.account(user)
        as_user = (account, self.password(user)) if self.config.admin is not None else None
        if as_user is not None:
            try:
                await self.call("POST", "users/create", {"username": account, "password": as_user[1]})
            except TrackingError as exc:
                if exc.code != "RESOURCE_ALREADY_EXISTS":
                    raise  # made before (by this daemon, or the user changed it): the daemon's derivation wins
                await self.call("PATCH", "users/update-password", {"username": account, "password": as_user[1]})
        recorded = user_experiment(self.store, user)
        if recorded is not None:
            try:
                found = (await self.call("GET", "experiments/get", experiment_id=recorded[0]))["experiment"]
            except TrackingError as exc:
                if exc.code != "RESOURCE_DOES_NOT_EXIST":
                    raise
            else:
                if found.get("lifecycle_stage") == "deleted":  # the user deleted it: their next runs bring it back
                    await self.call("POST", "experiments/restore", {"experiment_id": recorded[0]})
                return recorded[0]
        name = experiment_name(user)
        for attempt in range(5):
            try:
                made = await self.call("POST", "experiments/create", {"name": name}, as_user=as_user)
                break
            except TrackingError as exc:
                if exc.code != "RESOURCE_ALREADY_EXISTS" or attempt == 4:
                    raise
                log.warning("MLflow experiment %s exists and is not %s's: making another", name, user)
                name = f"{experiment_name(user)}-{secrets.token_hex(3)}"
        experiment = str(made["experiment_id"])
        with self.store.tx():
            save_user_experiment(self.store, user, experiment, name)
        return experiment

    def experiment_name_of(self, user: str) -> str:
        """The name of ``user``'s experiment (``pai/<user>`` unless that was taken)."""
        recorded = user_experiment(self.store, user)
        return recorded[1] if recorded else experiment_name(user)

    # ---- runs -------------------------------------------------------------------------------------------------
    async def open_run(
        self, user: str, job: Job, origin: dict[str, Any] | None = None, wait_s: float = SUBMIT_WAIT_S
    ) -> TrackedRun | str:
        """The new job's run (SCHEDULED), or why the server could not make it (the job is submitted without one
        rather than refused, and its events say why). ``origin``: where the job came from (``common/origin.py``)."""
        if not await self.wait_ready(wait_s):
            why = f"the MLflow server did not answer within {wait_s:.0f} s (starting? see local/mlflow-server.log)"
            log.warning("job %s~%s has no MLflow run: %s", user, job.name, why)
            return why
        try:
            return await self._new_run(user, job, origin or {})
        except (TrackingError, httpx.HTTPError, KeyError) as exc:
            log.warning("job %s~%s has no MLflow run: %s", user, job.name, exc)
            return f"the MLflow server did not make it: {exc}"

    async def _new_run(self, user: str, job: Job, origin: dict[str, Any]) -> TrackedRun:
        tags = [{"key": k, "value": v} for k, v in run_tags(user, job, origin).items()]
        for again in (False, True):
            experiment = await self.experiment_of(user)
            body = {
                "experiment_id": experiment,
                "user_id": user,
                "run_name": job.name,
                "start_time": int(time.time() * 1000),
                "tags": tags,
            }
            try:
                made = await self.call("POST", "runs/create", body)
                break
            except TrackingError:
                if again:
                    raise
                self._users.pop(user, None)  # the user deleted their experiment meanwhile: look it up again
        run_id = str(made["run"]["info"]["run_id"])
        params = [{"key": str(k)[:250], "value": param_value(v)} for k, v in run_params(job).items()]
        if params:
            await self.call("POST", "runs/log-batch", {"run_id": run_id, "params": params[:100]})
        await self.call("POST", "runs/update", {"run_id": run_id, "status": "SCHEDULED"})
        return TrackedRun(run_id, experiment)

    async def discard(self, run: TrackedRun) -> None:
        """Delete a run made for a submission that was then refused (its name taken, the disk full...)."""
        try:
            await self.call("POST", "runs/delete", {"run_id": run.run_id})
        except (TrackingError, httpx.HTTPError) as exc:
            log.warning("could not delete MLflow run %s of a refused submission: %s", run.run_id, exc)

    def changed(self, row: JobCore, state: str, outputs: tuple[Path, dict[str, str]] | None = None) -> None:
        """Job ``row`` became ``state`` (as the notifier hears it): the run's status follows, in the background;
        an ended job's ``outputs`` ((its directory, {output: directory beneath it})) become the run's artifacts."""
        if state in ("RUNNING", "RETRIED"):  # (a retry waits for its next attempt, in the same run)
            status = "RUNNING" if state == "RUNNING" else "SCHEDULED"
            tags = {"pai.attempt": str(row["attempt"]), "pai.state": "RUNNING" if state == "RUNNING" else "WAITING"}
            self._put(row["id"], "update", {"status": status, "tags": tags})
        elif state in END_STATUS:
            self._put(row["id"], "backfill", {"attempts": int(row["attempt"])})
            if outputs is not None and budget_bytes() > 0:
                uploaded = {o: d for o, d in outputs[1].items() if o in artifacts.UPLOADED}
                self._put(row["id"], "artifacts", {"base": outputs[0], "outputs": uploaded})
            tags = {"pai.state": state, "pai.attempt": str(row["attempt"])}
            if row["exit_code"] is not None:
                tags["pai.exitCode"] = str(row["exit_code"])
            end = row["completed_time"] or int(time.time() * 1000)
            self._put(row["id"], "update", {"status": END_STATUS[state], "end_time": end, "tags": tags})

    def sweep(self, user: str, sweep: str, trials: list[int], state: dict[str, Any]) -> None:
        """Sweep ``user~sweep`` stored its ``state`` with these trials: their runs become children of the sweep's
        parent run (made with the first: the search as its params and tags, Optuna's sampler and pruner named),
        which is RUNNING until the sweep is done, then has the best trial's objective."""
        if trials or state.get("status") == "done":  # (a driver stores its state at every change: most add nothing)
            self._put(
                trials[0] if trials else 0, "sweep", {"user": user, "sweep": sweep, "trials": trials, "state": state}
            )

    def metrics(self, job_id: int, step: int | None, metrics: dict[str, float], when_ms: int) -> None:
        """What ``pai_jupyter.report()`` sent for the job, logged into its run too."""
        self._put(job_id, "metrics", {"step": step or 0, "metrics": metrics, "time": when_ms})

    def _put(self, job_id: int, kind: str, what: dict[str, Any]) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # (a tool that opens the store sends nothing)
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.ensure_future(self._work())
        if self._queue.qsize() >= QUEUE_BOUND:
            dropped = self._queue.get_nowait()
            self._queue.task_done()
            self._queued_at.pop(dropped[3], None)
            log.warning("MLflow updates pile up; dropped one for job %s", dropped[0])
        self._sent += 1
        now = asyncio.get_running_loop().time()
        self._queued_at[self._sent] = now
        if kind == "update":
            self._newest[job_id] = self._sent
            self._last_change = now
        self._queue.put_nowait((job_id, kind, what, self._sent))

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            job_id, kind, what, number = await self._queue.get()
            try:
                if kind == "update" and self._newest.get(job_id) != number:
                    self._queued_at.pop(number, None)
                    continue  # a newer state of the job is queued behind this one: it says all this one would
                if kind == "update":
                    del self._newest[job_id]
                await self._after_the_jobs(number)
                if kind == "sweep":
                    await updates.sweep(self, **what)
                elif (run := run_of(self.store, job_id)) is not None:
                    await updates.send(self, run, job_id, kind, what)
            except Exception as exc:  # (one update lost is logged; the next is tried)
                log.warning("updating the MLflow run of job %s failed: %s", job_id, exc)
                self._record(job_id, f"the MLflow run was not updated ({kind}): {exc}")
            finally:
                self._queue.task_done()

    async def _after_the_jobs(self, number: int) -> None:
        """The daemon's own work first: while jobs change state (a burst of them starting and ending), an update
        waits for QUIET_S without a change, or until it has waited MAX_DEFER_S since it was queued; so tracking
        catches up after a burst rather than slowing it (``make bench`` P23), and is never more than that late
        because of one."""
        loop = asyncio.get_running_loop()
        queued = self._queued_at.pop(number, loop.time())
        while True:
            now = loop.time()
            quiet = now - self._last_change
            if quiet >= QUIET_S or now - queued >= MAX_DEFER_S:
                return
            await asyncio.sleep(min(QUIET_S - quiet, MAX_DEFER_S - (now - queued)))

    async def drain(self) -> None:
        """Wait for the updates under way (tests; a stopping daemon)."""
        if self._queue is not None:
            await self._queue.join()

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        if self._http is not None:
            await self._http.aclose()

    def _record(self, job_id: int, message: str) -> None:
        try:
            with self.store.tx():
                if self.store.job_core(job_id) is not None:
                    self.store.add_event(job_id, "Warning", "TrackingFailed", message)
        except Exception:
            log.exception("recording a tracking failure of job %s failed", job_id)
