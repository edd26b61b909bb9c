"""Which running jobs to preempt so that the waiting heads fit (``choose``): a pure function of what runs, what is
on its way out and the heads the plan (backfill.py) could not start, run after each plan (shares.py).

- Who may preempt whom: a head preempts a running job of a lower priority class (queue.PRIORITY_CLASSES), or one
  that runs over its user's quota on borrowed idle room (``borrowed``), whatever its class. A head that would
  itself run over its user's quota (``borrowing``) preempts nobody, and a job preempted ``max_per_hour`` times in
  the last hour is left alone (it would never get anything done).
- What counts: what runs holds its room; a job already being stopped or preempted (``leaving``) still holds it
  but is on its way out, so its room counts as freed. A head that will fit once they are gone gets no new
  victims: that is what keeps one pass from preempting again while the last pass's victims exit.
- Room, as in the plan: a head in virtual cluster V fits in the least of V's quota left and the machine left.
  Freeing a job of V' gives machine room, and quota room only when V' is V.
- Heads go highest class first (stable). A head that fits takes its room; one that does not takes victims in
  order of preference (borrowed first, then the lowest class, then batch before interactive: a kernel, a Lab or
  a Hub server, whose owner is told; then the most recently started, then the larger id) until it fits, or none
  at all when even every candidate would not make it fit. Then the victims it does not need are let go, the one
  we would least like to preempt first: removing any one victim left makes the head not fit. A gang job is one
  victim with everything it holds. Victims are gone for later heads and the room a head takes is taken, so no
  two heads count the same freed room.

Resources are backfill.py's (cpu, memory MB, gpu) tuples: this runs over every running job and waiting head on
each pass (P18 in tests/bench). The candidates are sorted once; those a head may take are a prefix of that
order (borrowed ones, then classes below its own), and the prefix's sums tell at once when no victims can help.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from .backfill import ZERO, Res, add, fits, least, sub
from .queue import PRIORITY_CLASSES

CLASS_OF = {rank: name for name, rank in PRIORITY_CLASSES.items()}


@dataclass(frozen=True)
class Running:
    """A running job as a candidate victim."""

    id: int
    vc: str
    user: str
    rank: int  # priority rank (queue.PRIORITY_CLASSES value: crit 120, prod 100, test 10, oppo -1)
    demand: Res  # everything the job holds now (all its tasks: a gang job goes whole)
    started: float  # epoch seconds its current attempt started
    borrowed: bool = False  # running over its user's quota on borrowed idle room: preemptible by any in-quota job
    preempted_recently: int = 0  # times it was preempted in the last hour
    interactive: bool = False  # a kernel / in-task Jupyter / Hub server: preempted last among equals


@dataclass(frozen=True)
class Head:
    """A waiting head the plan could not start."""

    id: int
    vc: str
    rank: int
    need: Res  # what it still needs to start (its waiting tasks, whole if gang)
    borrowing: bool = False  # it would run over its user's quota: it never preempts anyone


@dataclass(frozen=True)
class Preemption:
    victim: int
    preemptor: int
    reason: str  # in words, the head's class and what it lacks: "a crit job needs 1 GPU"


def _preference(r: Running) -> tuple[bool, int, bool, float, int]:
    """Sort key: the job we would rather preempt first."""
    return (not r.borrowed, r.rank, r.interactive, -r.started, -r.id)


def choose(
    total: Res,
    quotas: dict[str, Res],
    running: list[Running],
    leaving: list[tuple[str, Res]],
    heads: list[Head],
    max_per_hour: int = 3,
) -> list[Preemption]:
    """The preemptions that make the heads fit (see the module's docstring), each head's victims in order of
    preference. ``quotas``: each virtual cluster's (a virtual cluster without one is bounded by the machine);
    ``leaving``: (virtual cluster, what it holds) of the jobs already on their way out. Pure."""
    used: Res = ZERO
    used_vc: dict[str, Res] = {}
    for vc, demand in [(r.vc, r.demand) for r in running] + leaving:
        used, used_vc[vc] = add(used, demand), add(used_vc.get(vc, ZERO), demand)
    for vc, demand in leaving:  # on their way out: freed for this decision
        used, used_vc[vc] = sub(used, demand), sub(used_vc[vc], demand)
    pool = sorted((r for r in running if r.preempted_recently < max_per_hour), key=_preference)
    n_borrowed = sum(1 for r in pool if r.borrowed)
    ranks = [r.rank for r in pool[n_borrowed:]]
    # upper bounds of what a prefix of the pool frees: on the machine, and per virtual cluster (victims taken by an
    # earlier head only lower them)
    machine_sums: list[Res] = [ZERO]
    vc_at: dict[str, list[int]] = {}
    vc_sums: dict[str, list[Res]] = {}
    for i, r in enumerate(pool):
        machine_sums.append(add(machine_sums[-1], r.demand))
        vc_at.setdefault(r.vc, []).append(i)
        sums = vc_sums.setdefault(r.vc, [ZERO])
        sums.append(add(sums[-1], r.demand))
    gone: set[int] = set()
    out: list[Preemption] = []
    for head in sorted(heads, key=lambda h: -h.rank):
        quota = quotas.get(head.vc, total)
        quota_room, machine_room = sub(quota, used_vc.get(head.vc, ZERO)), sub(total, used)
        room = least(quota_room, machine_room)
        victims: list[Running] = []
        if not fits(head.need, room):
            if head.borrowing:
                continue
            end = n_borrowed + bisect.bisect_left(ranks, head.rank)
            own = bisect.bisect_left(vc_at.get(head.vc, []), end)
            most = least(add(quota_room, vc_sums.get(head.vc, [ZERO])[own]), add(machine_room, machine_sums[end]))
            if not fits(head.need, most):
                continue  # even every candidate would not make it fit
            victims = _victims(head, pool[:end], gone, quota_room, machine_room)
            if not victims:
                continue
            why = _reason(head, sub(head.need, room))
            for v in victims:
                gone.add(v.id)
                used, used_vc[v.vc] = sub(used, v.demand), sub(used_vc[v.vc], v.demand)
                out.append(Preemption(v.id, head.id, why(v)))
        used, used_vc[head.vc] = add(used, head.need), add(used_vc.get(head.vc, ZERO), head.need)
    return out


def _victims(
    head: Head, candidates: list[Running], gone: set[int], quota_room: Res, machine_room: Res
) -> list[Running]:
    """The fewest of ``candidates`` (in order of preference) that make ``head`` fit, or none. A candidate that
    frees nothing the head still lacks is passed over: the let-go pass would drop it anyway."""
    need = head.need
    chosen: list[Running] = []
    freed, freed_vc = ZERO, ZERO
    for r in candidates:
        if r.id in gone:
            continue
        same = r.vc == head.vc
        if not any(
            r.demand[i] > 0
            and (need[i] > machine_room[i] + freed[i] or (same and need[i] > quota_room[i] + freed_vc[i]))
            for i in range(3)
        ):
            continue
        chosen.append(r)
        freed = add(freed, r.demand)
        if same:
            freed_vc = add(freed_vc, r.demand)
        if fits(need, least(add(quota_room, freed_vc), add(machine_room, freed))):
            break
    else:
        return []
    keep = [True] * len(chosen)
    for i in reversed(range(len(chosen))):  # let go of those not needed, the one we would least like to lose first
        r = chosen[i]
        less, less_vc = sub(freed, r.demand), sub(freed_vc, r.demand) if r.vc == head.vc else freed_vc
        if fits(need, least(add(quota_room, less_vc), add(machine_room, less))):
            keep[i] = False
            freed, freed_vc = less, less_vc
    return [r for r, k in zip(chosen, keep, strict=True) if k]


def _reason(head: Head, lack: Res) -> Callable[[Running], str]:
    """Why a victim goes, in words: the head's class and what it lacks."""
    cls = CLASS_OF.get(head.rank, f"priority-{head.rank}")
    words = ", ".join(f"{n} {label}" for n, label in zip(lack, ("CPU", "MB memory", "GPU"), strict=True) if n > 0)
    needs = f"needs {words or 'room'}"

    def why(victim: Running) -> str:
        if victim.borrowed:
            return f"over its user's quota (borrowed), a {cls} job within quota {needs}"
        return f"a {cls} job {needs}"

    return why
