"""The driver's write-behind: the sweep's state is stored on a thread of its own, so that the next trial's
submission never waits for it (``make bench`` P19). States are coalesced (only the newest is written), with the
new trials' jobs for the daemon to tag ``sweep:{name}`` in the same request; each write names the revision the
last one made, and a 409 is resolved here: a stop asked for from elsewhere is taken into the state, another
driver's write ends this one (``SweepTaken``)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from ..client import Client
from ..client.errors import JobConflict

STOPS = ("stopping", "stopping all")
INTERVAL = 0.25  # seconds between two writes at most (a trial submitted meanwhile is adopted by a new driver)


class SweepTaken(RuntimeError):
    """Another driver wrote the sweep's state since this one read it (it attached and took over)."""


class Writer:
    def __init__(self, client: Client, name: str, revision: int) -> None:
        self.client, self.name, self.revision = client, name, revision
        self.error: BaseException | None = None
        self.remote_status: str | None = None  # a stop another kernel asked for, seen on a conflict
        self._tags: list[str] = []
        self._state: dict[str, Any] | None = None
        self._cond = threading.Condition()
        self._busy = False
        self._flushing = False
        self._last = 0.0
        self._thread: threading.Thread | None = None

    def tag(self, job: str) -> None:
        """Have the daemon tag this trial's job with the next state written."""
        with self._cond:
            self._tags.append(job)

    def save(self, state: dict[str, Any]) -> None:
        """Store a copy of ``state`` (taken now) soon; an older one not yet written is dropped."""
        snapshot = json.loads(json.dumps(state))
        with self._cond:
            self._state = snapshot
            self._wake()

    def flush(self) -> None:
        """Wait until everything asked for is written; raise what the writes raised."""
        with self._cond:
            self._flushing = True
            self._cond.notify_all()
            while self._busy or self._state is not None:
                self._cond.wait()
            self._flushing = False
        if self.error is not None:
            raise self.error

    def _wake(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"sweep-writer-{self.name}", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._state is None:
                    if not self._cond.wait(timeout=5.0) and self._state is None:
                        self._thread = None  # idle: the next write starts a thread again (_wake, under the lock)
                        return
                while not self._flushing and (wait := self._last + INTERVAL - time.monotonic()) > 0:
                    self._cond.wait(timeout=wait)  # coalesce: the newest state in this interval is written
                state, tags, self._state, self._tags = self._state, self._tags, None, []
                self._busy = True
            try:
                if self.error is None:
                    self._put(state, tags)
                    self._last = time.monotonic()
            except BaseException as exc:
                self.error = exc
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _put(self, state: dict[str, Any], tags: list[str]) -> None:
        try:
            self.revision = self.client.put_sweep_state(self.name, state, self.revision, tag=tags)
        except JobConflict:
            stored = self.client.sweep_state(self.name)
            theirs = stored.state or {}
            if theirs.get("driver") != state.get("driver") or theirs.get("status") not in STOPS:
                raise SweepTaken(f"sweep {self.name} is driven elsewhere now (revision {stored.revision})") from None
            self.remote_status = theirs["status"]
            if state["status"] == "running":
                state["status"] = theirs["status"]
            self.revision = self.client.put_sweep_state(self.name, state, stored.revision, tag=tags)
