"""Which waiting jobs start now, as a pure function of the queue and what runs (``plan``): priority order, a
reservation for the job at the head of each virtual cluster's line, and EASY backfill behind it.

- Order: the queue (``queue.py``) is by priority class (OpenPAI/HiveD's crit > prod > test = default > oppo),
  then by the place an admin gave the job, else its submission time. The head starts as soon as it fits; a gang
  job starts all its tasks or none, a job without gang allocation starts the tasks that fit, in order.
- Reservation: when the head does not fit, it is given the earliest time its tasks will fit (its "shadow
  time"), computed from when the running jobs end at the latest, and what will be left over then ("extra").
- Backfill: a later job whose tasks all fit now starts now when it cannot delay the head: either it is known to
  end before the shadow time, or it takes only the extra. So the head starts no later than its reservation (no
  later than under strict FIFO when every run time is known), and no job starves (each becomes the head in turn).
- Estimates: the embedded runtimes have no user-declared run time. A job's ``extras.maxRunTimeMinutes`` is one
  (an upper bound: the daemon stops a job when it is reached, ``Ending.check_deadlines``), and a running job's
  deadline says when it ends at the latest. Without them nothing is assumed: a running job with no deadline never
  ends as far as the shadow time goes (then there is no shadow time, and the extra is only what is free now
  beyond the head's need: resources the head could not use anyway), and a waiting job with no max run time is
  backfilled only into the extra.
- Virtual clusters share the machine: first every virtual cluster's heads start while they fit (as under FIFO),
  then each head that waits gets its reservation, and only then is anything backfilled. A job behind a head
  must delay no head at all: its own (as above) nor another virtual cluster's, whose quota it does not touch but
  whose machine room it could take (it ends before that head's shadow time, or leaves the machine room every
  other waiting head needs).

Resources are (cpu, memory MB, gpu) tuples here: this runs over every waiting job on each pass (P18 in
tests/bench: 10,000 jobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Res = tuple[int, int, int]  # cpu, memory_mb, gpu
ZERO: Res = (0, 0, 0)


def add(a: Res, b: Res) -> Res:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def sub(a: Res, b: Res) -> Res:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def fits(want: Res, room: Res) -> bool:
    return want[0] <= room[0] and want[1] <= room[1] and want[2] <= room[2]


def least(a: Res, b: Res) -> Res:
    return (min(a[0], b[0]), min(a[1], b[1]), min(a[2], b[2]))


@dataclass(frozen=True)
class Waiting:
    """A queued job as the plan sees it: its waiting tasks' demands in order, gang or not, and how long it runs at
    most (seconds; None: unknown)."""

    id: int
    tasks: tuple[Res, ...]
    gang: bool = True
    estimate_s: float | None = None
    user: str = ""  # its owner (per-user quotas and fair share: core/shares.py)
    total: Res = field(init=False)

    def __post_init__(self) -> None:
        total = ZERO
        for t in self.tasks:
            total = add(total, t)
        object.__setattr__(self, "total", total)


@dataclass(frozen=True)
class Busy:
    """Resources held by a running task of virtual cluster ``vc`` until ``ends_by`` at the latest (epoch
    seconds; None: unknown)."""

    vc: str
    demand: Res
    ends_by: float | None


@dataclass
class Reservation:
    """Why a virtual cluster's head waits: its need, what it lacks now, and when it will fit (None: unknown)."""

    job_id: int
    need: Res
    room: Res
    shadow: float | None


@dataclass
class Plan:
    starts: list[tuple[int, int]] = field(default_factory=list)  # (job id, how many of its first waiting tasks)
    heads: dict[str, Reservation] = field(default_factory=dict)
    backfilled: set[int] = field(default_factory=set)


def _room(vc: str, quotas: dict[str, Res], total: Res, used: Res, used_vc: dict[str, Res]) -> Res:
    return least(sub(quotas[vc], used_vc.get(vc, ZERO)), sub(total, used))


def _shadow(
    vc: str, need: Res, quotas: dict[str, Res], total: Res, used: Res, used_vc: dict[str, Res], busy: list[Busy]
) -> tuple[float | None, Res]:
    """The earliest time ``need`` fits as tasks with known ends end, and the room then; (None, room now) when
    the known ends never make it fit."""
    ends = sorted((b for b in busy if b.ends_by is not None), key=lambda b: b.ends_by or 0.0)
    used_vc = dict(used_vc)
    room = _room(vc, quotas, total, used, used_vc)
    for b in ends:
        used = sub(used, b.demand)
        used_vc[b.vc] = sub(used_vc.get(b.vc, ZERO), b.demand)
        room = _room(vc, quotas, total, used, used_vc)
        if fits(need, room):
            return b.ends_by, room
    return None, room


def plan(now: float, total: Res, quotas: dict[str, Res], busy: list[Busy], queues: dict[str, list[Waiting]]) -> Plan:
    """What starts now (see the module's docstring). ``queues``: each virtual cluster's waiting jobs in queue
    order; ``busy``: what runs. Pure: nothing is changed."""
    out = Plan()
    used: Res = ZERO
    used_vc: dict[str, Res] = {}
    for b in busy:
        used = add(used, b.demand)
        used_vc[b.vc] = add(used_vc.get(b.vc, ZERO), b.demand)
    started: list[Busy] = []
    blocked: dict[str, int] = {}  # virtual cluster -> the place of its head that does not fit
    for vc, queue in queues.items():  # first every virtual cluster's heads, in order, while they fit (as FIFO)
        head_at = 0
        room = _room(vc, quotas, total, used, used_vc)
        while head_at < len(queue):
            job = queue[head_at]
            n = _how_many(job, room)
            if n:
                took = ZERO
                for t in job.tasks[:n]:
                    took = add(took, t)
                out.starts.append((job.id, n))
                used, room = add(used, took), sub(room, took)
                used_vc[vc] = add(used_vc.get(vc, ZERO), took)
                ends = now + job.estimate_s if job.estimate_s is not None else None
                started.append(Busy(vc, took, ends))
            if n < len(job.tasks):
                blocked[vc] = head_at
                break
            head_at += 1
    extras: dict[str, Res] = {}
    for vc, head_at in blocked.items():  # then a reservation for each head that waits
        head = queues[vc][head_at]
        need = head.total
        for job_id, n in out.starts:
            if job_id == head.id:
                for t in head.tasks[:n]:
                    need = sub(need, t)
        room = _room(vc, quotas, total, used, used_vc)
        shadow, then = _shadow(vc, need, quotas, total, used, used_vc, busy + started)
        free_now: Res = (max(room[0] - need[0], 0), max(room[1] - need[1], 0), max(room[2] - need[2], 0))
        extras[vc] = sub(then, need) if shadow is not None else free_now
        out.heads[vc] = Reservation(head.id, need, room, shadow)
    for vc, head_at in blocked.items():  # and backfill behind it: what cannot delay any head
        _backfill(now, vc, queues[vc][head_at + 1 :], out, extras, total, quotas, used_vc)
        used = ZERO
        for u in used_vc.values():
            used = add(used, u)
    return out


def _how_many(job: Waiting, room: Res) -> int:
    """How many of the job's first tasks start in ``room``: all or none for a gang job."""
    if fits(job.total, room):
        return len(job.tasks)
    if job.gang:
        return 0
    n, left = 0, room
    while n < len(job.tasks) and fits(job.tasks[n], left):
        left = sub(left, job.tasks[n])
        n += 1
    return n


def _backfill(
    now: float,
    vc: str,
    behind: list[Waiting],
    out: Plan,
    extras: dict[str, Res],
    total: Res,
    quotas: dict[str, Res],
    used_vc: dict[str, Res],
) -> None:
    """Start the jobs ``behind`` virtual cluster ``vc``'s head that fit now and delay no head: its own (they end
    before its shadow time, or take only its extra) nor another virtual cluster's, whose quota they do not touch
    but whose machine they share (they end before that head's shadow, or leave the machine room all the other
    heads need)."""
    own = out.heads[vc]
    others = [r for w, r in out.heads.items() if w != vc]
    others_need = ZERO
    for r in others:
        others_need = add(others_need, r.need)
    others_shadow = min((r.shadow for r in others if r.shadow is not None), default=None)
    known = all(r.shadow is not None for r in others)
    extra = extras[vc]
    for job in behind:
        used = ZERO
        for u in used_vc.values():
            used = add(used, u)
        room = _room(vc, quotas, total, used, used_vc)
        if room[0] <= 0:
            break  # every task needs a CPU
        if not fits(job.total, room):
            continue
        ends = now + job.estimate_s if job.estimate_s is not None else None
        if own.shadow is not None and ends is not None and ends <= own.shadow:
            takes_extra = False  # gone before the head can start
        elif fits(job.total, extra):
            takes_extra = True
        else:
            continue
        gone_first = known and ends is not None and others_shadow is not None and ends <= others_shadow
        if others and not gone_first and not fits(add(job.total, others_need), sub(total, used)):
            continue  # it would take machine room another virtual cluster's head waits for
        if takes_extra:
            extra = sub(extra, job.total)
        out.starts.append((job.id, len(job.tasks)))
        out.backfilled.add(job.id)
        used_vc[vc] = add(used_vc.get(vc, ZERO), job.total)
