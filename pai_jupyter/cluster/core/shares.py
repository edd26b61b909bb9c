"""The sharing pass around each scheduling plan (launching.py; docs/queue.md, "Sharing"):

- before the plan (``shape``): each virtual cluster's line is put in fair-share order (users with less recent
  usage first within a priority class, fairshare.py), then per-user quotas: a job that would put its user over
  their quota waits with the reason shown, or, where the virtual cluster lets users borrow, goes to the back of
  the line and runs as preemptible on room nobody within quota wants;
- after it (``preempt``): a head that still does not fit preempts running jobs of lower classes or borrowed room
  when that makes it fit (preemptplan.py, a pure function); the victims get their signal and grace and wait again.

Only the embedded scheduler's: a batch system's runtime (Slurm) weighs quotas, fair share and preemption itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from . import fairshare
from .backfill import ZERO, Plan, Res, Waiting, add
from .preemptplan import Head, Running, choose
from .queue import DEFAULT_PRIORITY, PRIORITY_CLASSES
from .sharing import UserQuota, is_interactive
from .state import ClusterState
from .store import JobCore
from .store.sharing import HoldingJob, holding_jobs, preempted_since
from .store.usage import task_intervals

log = logging.getLogger("pai_jupyter.cluster")
USAGE_FRESH_S = 30.0  # ended runs' decayed usage is read again after this, or when what runs changes
USAGE_HORIZON = 10  # half-lives: older runs weigh under 0.1 % and are not read
PLACED_S = 3600.0  # a job fair share places ahead counts as this long a run of its weight (else its max run time)


def rank_of(priority: str | None) -> int:
    return PRIORITY_CLASSES.get(priority or "", DEFAULT_PRIORITY)


class Shares:
    """The pass's state between plans: each user's decayed usage (read again when what runs changes) and which
    waiting jobs run on borrowed room; ``state.queue`` gets what the queue view shows (fair order, held jobs)."""

    def __init__(self, state: ClusterState, preempt: Callable[[JobCore, str], bool]) -> None:
        self.state, self.store, self.sharing = state, state.store, state.sharing
        self.preempt_job = preempt
        self.usage: dict[str, float] = {}  # user -> decayed usage (dominant-share seconds), as last read
        self._usage_key: tuple[frozenset[int], float] = (frozenset(), 0.0)
        self.borrowing: set[int] = set()  # waiting jobs over their user's quota that may run on borrowed room

    def _rank(self, job_id: int) -> int:
        return rank_of(self.state.queue.order.get(job_id, (None, None))[0])

    # ---- before the plan -----------------------------------------------------------------------------------------
    def shape(self, queues: dict[str, list[Waiting]]) -> dict[str, list[Waiting]]:
        """The lines in fair-share order with the quotas applied, highest head first (a higher class's head takes
        room before another virtual cluster's lower one, so the room a preemption frees goes to its preemptor)."""
        fair, quotas = self.sharing.half_life_s > 0, self.sharing.has_quotas
        self.borrowing = set()
        self.state.queue.held, self.state.queue.fair = {}, {}
        if fair or quotas:
            holding = holding_jobs(self.store)
            if fair:
                self.read_usage(holding)
            for vc, line in queues.items():
                if fair and line and any(w.user != line[0].user for w in line):
                    ordered = self._fair(vc, line)
                    if any(a is not b for a, b in zip(ordered, line, strict=True)):
                        self.state.queue.fair[vc] = {w.id: i for i, w in enumerate(ordered)}
                    line = ordered
                if quotas:
                    line = self._within_quota(vc, line, holding)
                queues[vc] = line
        return dict(sorted(queues.items(), key=lambda kv: -self._rank(kv[1][0].id) if kv[1] else 0))

    def _fair(self, vc: str, line: list[Waiting]) -> list[Waiting]:
        cap = self.state.capacity.total
        p0, p1, p2 = (1 / t if t > 0 else 0.0 for t in (cap.cpu, cap.memory_mb, cap.gpu))  # (fairshare.weight)
        entries = self.state.queue.by_vc.get(vc, [])  # the line is theirs, in their order, unless some dropped out
        if len(entries) == len(line):
            ranks = [-e[0] for e in entries]
        else:
            rank_of_id = {e[2]: -e[0] for e in entries}
            ranks = [rank_of_id.get(w.id, DEFAULT_PRIORITY) for w in line]
        users = [w.user for w in line]
        costs = [max(w.total[0] * p0, w.total[1] * p1, w.total[2] * p2) * (w.estimate_s or PLACED_S) for w in line]
        return fairshare.order(line, ranks, users, costs, self.usage)

    def read_usage(self, holding: list[HoldingJob] | None = None) -> dict[str, float]:
        """Each user's decayed usage (fairshare.decayed over their task runs), read again when what runs changed or
        after ``USAGE_FRESH_S`` (``holding`` None: read now)."""
        now = time.time()
        key = frozenset(h["id"] for h in holding) if holding is not None else frozenset()
        if holding is not None and key == self._usage_key[0] and now - self._usage_key[1] < USAGE_FRESH_S:
            return self.usage
        half_life = self.sharing.half_life_s
        cap = self.state.capacity.total
        total = (cap.cpu, cap.memory_mb, cap.gpu)
        runs: dict[str, list[tuple[float, float | None, float]]] = {}
        for r in task_intervals(self.store, int((now - USAGE_HORIZON * half_life) * 1000)):  # (usage's query)
            end = r.end_ms / 1000 if r.end_ms is not None else None
            weight = fairshare.weight((r.cpu, r.memory_mb, r.gpu), total)
            runs.setdefault(r.user, []).append((r.start_ms / 1000, end, weight))
        self.usage = {user: fairshare.decayed(spans, now, half_life) for user, spans in runs.items()}
        self.state.queue.usage = self.usage
        self._usage_key = (key, now) if holding is not None else (frozenset({-1}), 0.0)  # (the next pass reads too)
        return self.usage

    def _within_quota(self, vc: str, line: list[Waiting], holding: list[HoldingJob]) -> list[Waiting]:
        """The jobs within their users' quotas in order, then (where borrowing is allowed) the others; a job in
        line counts against its user's quota for the jobs behind it, as it will run first. (Each user's room left
        is kept as a list and taken from in place: this runs over every waiting job on each pass, P18F.)"""
        used: dict[str, Res] = {}
        running: dict[str, int] = {}
        for h in holding:
            if h["vc"] == vc:
                used[h["user"]] = add(used.get(h["user"], ZERO), (h["cpu"], h["memory_mb"], h["gpu"]))
                running[h["user"]] = running.get(h["user"], 0) + 1
        left: dict[str, list[int] | None] = {}  # user -> [cpu, memory, gpu, jobs] they may still take (None: no quota)
        within, borrowing = [], []
        borrows = self.sharing.borrows(vc)
        for w in line:
            if w.user not in left:
                quota = self.sharing.quota(vc, w.user)
                left[w.user] = _room_left(quota, used.get(w.user, ZERO), running.get(w.user, 0))
            room = left[w.user]
            t = w.total
            if room is None:
                within.append(w)
            elif t[0] <= room[0] and t[1] <= room[1] and t[2] <= room[2] and room[3] >= 1:
                room[0], room[1], room[2], room[3] = room[0] - t[0], room[1] - t[1], room[2] - t[2], room[3] - 1
                within.append(w)
            elif borrows:
                borrowing.append(w)
                self.borrowing.add(w.id)
            else:
                quota = self.sharing.quota(vc, w.user)
                assert quota is not None
                taken = _taken(quota, room)
                why = quota.over((taken[0], taken[1], taken[2]), taken[3], t)
                self.state.queue.held[w.id] = f"{w.user} is at their quota in virtual cluster {vc!r}: {why}"
        return within + borrowing

    # ---- after it ------------------------------------------------------------------------------------------------
    def after(self, plan: Plan) -> None:
        """What the plan started changes what runs (the usage is read again next time); then preemption."""
        if plan.starts:
            self._usage_key = (self._usage_key[0] | {job_id for job_id, _ in plan.starts}, self._usage_key[1])
        self.preempt(plan)

    def preempt(self, plan: Plan) -> None:
        """Preempt what makes the waiting heads fit (preemptplan.choose), if anything does."""
        if not self.sharing.preempt or not plan.heads:
            return
        heads = [
            Head(r.job_id, vc, self._rank(r.job_id), r.need, r.job_id in self.borrowing) for vc, r in plan.heads.items()
        ]
        top = max((h.rank for h in heads if not h.borrowing), default=None)
        if top is None:
            return
        holding = holding_jobs(self.store)  # (read again: this pass started jobs)
        borrowed = self._borrowed(holding)
        candidates = [
            h["id"] for h in holding if not h["leaving"] and (rank_of(h["priority"]) < top or h["id"] in borrowed)
        ]
        if not candidates:
            return
        recent = preempted_since(self.store, candidates, int((time.time() - 3600) * 1000))
        rows = {job_id: self.store.job_core(job_id) for job_id in candidates}
        running = [
            Running(
                h["id"],
                h["vc"],
                h["user"],
                rank_of(h["priority"]),
                (h["cpu"], h["memory_mb"], h["gpu"]),
                h["started"] / 1000,
                h["id"] in borrowed,
                recent.get(h["id"], 0),
                (row := rows.get(h["id"])) is not None and is_interactive(self.state.job_model(row)),
            )
            for h in holding
            if not h["leaving"]
        ]
        leaving = [(h["vc"], (h["cpu"], h["memory_mb"], h["gpu"])) for h in holding if h["leaving"]]
        cap = self.state.capacity
        total = (cap.total.cpu, cap.total.memory_mb, cap.total.gpu)
        quotas = {vc: (q.cpu, q.memory_mb, q.gpu) for vc, q in cap.quotas.items()}
        for p in choose(total, quotas, running, leaving, heads, self.sharing.max_per_hour):
            victim, by = rows.get(p.victim), self.store.job_core(p.preemptor)
            if victim is None or by is None:
                continue
            reason = f"preempted by {by['user']}~{by['name']}: {p.reason}"
            self.preempt_job(victim, reason)

    def _borrowed(self, holding: list[HoldingJob]) -> set[int]:
        """The running jobs on borrowed room: of each user's jobs in a virtual cluster with a quota, those started
        last that take them past it."""
        if not self.sharing.has_quotas:
            return set()
        mine: dict[tuple[str, str], list[HoldingJob]] = {}
        for h in holding:
            if not h["leaving"]:
                mine.setdefault((h["vc"], h["user"]), []).append(h)
        out = set()
        for (vc, user), jobs in mine.items():
            quota = self.sharing.quota(vc, user)
            if quota is None:
                continue
            used, count = ZERO, 0
            for h in sorted(jobs, key=lambda h: (h["started"], h["id"])):
                used, count = add(used, (h["cpu"], h["memory_mb"], h["gpu"])), count + 1
                if not quota.holds(used) or (quota.jobs is not None and count > quota.jobs):
                    out.add(h["id"])
        return out


BIG = 1 << 62  # "no limit" in a room left


def _room_left(quota: UserQuota | None, used: Res, running: int) -> list[int] | None:
    if quota is None:
        return None
    limits = (quota.cpu, quota.memory_mb, quota.gpu, quota.jobs)
    return [BIG if lim is None else lim - have for lim, have in zip(limits, (*used, running), strict=True)]


def _taken(quota: UserQuota, room: list[int]) -> tuple[int, int, int, int]:
    """What a user holds (and will, by the jobs ahead in line) from the room they have left."""
    limits = (quota.cpu, quota.memory_mb, quota.gpu, quota.jobs)
    c, m, g, j = (0 if lim is None else lim - r for lim, r in zip(limits, room, strict=True))
    return c, m, g, j
