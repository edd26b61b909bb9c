"""Fair share, pure (shares.py applies it before each plan): who has used the cluster least lately goes first
within a priority class.

- Weight: a job's dominant share of the machine (DRF: the largest of its CPU, memory and GPU fractions), so a
  GPU job on a cluster with few GPUs weighs what it takes from others.
- Usage: a user's runs as (start, end, weight), each instant weighted 2^-(age / half-life): yesterday's burst
  fades, and a user who stops computing soon counts as new (``decayed``, in closed form).
- Order: within each run of one priority class in a line, the users' own lines (each in its own order) are
  merged by least usage plus what the user's jobs merged earlier in the run cost, ties by the place in line.
  Equal users alternate; classes never mix and a user's own jobs keep their order (an admin's place included).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from .backfill import Res

T = TypeVar("T")
LN2 = math.log(2)


def weight(demand: Res, total: Res) -> float:
    """Dominant share of the machine (DRF): max(cpu/total.cpu, mem/total.mem, gpu/total.gpu); a resource the
    machine has none of counts nothing."""
    return max((d / t for d, t in zip(demand, total, strict=True) if t > 0), default=0.0)


def decayed(intervals: Iterable[tuple[float, float | None, float]], now: float, half_life_s: float) -> float:
    """Usage of (start_s, end_s or None = still running, weight) intervals, each instant weighted
    2^-(age/half_life), in weighted seconds: weight * h/ln2 * (2^-((now-end)/h) - 2^-((now-start)/h)), computed
    with expm1 so that a long half-life loses no precision (h = inf: weight * duration). Times after ``now``
    count as ``now``."""
    if not half_life_s > 0:
        raise ValueError(f"half-life must be positive, not {half_life_s}")
    k = LN2 / half_life_s
    usage = 0.0
    for start, end, w in intervals:
        end = now if end is None else min(end, now)
        start = min(start, end)
        if end <= start or w == 0:
            continue
        if math.isinf(half_life_s):
            usage += w * (end - start)
        else:  # h/ln2 * 2^-(now-end)/h * (1 - 2^-(end-start)/h)
            usage += w * math.exp(-(now - end) * k) * -math.expm1(-(end - start) * k) / k
    return usage


def order(
    line: Sequence[T],
    ranks: Sequence[int],
    users: Sequence[str],
    costs: Sequence[float],
    usage: Mapping[str, float],
) -> list[T]:
    """The line (already in queue order: rank desc, then place) reordered for fair share: within each run of equal
    rank, users' own sub-lines (each kept in its order) are merged by least (usage[user] + cost of that user's jobs
    already placed earlier in this run); ties by the earlier original position. Ranks never mix; each user's own
    order is kept. ``ranks``, ``users`` and ``costs`` are the jobs', in line order (lists made in one pass each:
    this runs over every waiting job on each scheduling pass, P18F).

    As a sort: each job's key is its user's usage plus the cost of that user's jobs before it in the run, and each
    run is sorted by it, stably (ties keep their places). A user's keys only grow along their own line (costs are not
    negative), so this merges the users' lines exactly as taking the least head each time would."""
    n = len(line)
    if n < 2 or all(u == users[0] for u in users):
        return list(line)
    keys: list[float] = []  # each job's "usage so far"; a stable sort of each run by it keeps ties in place
    out: list[T] = []
    start, spent = 0, dict(usage)
    for i, (r, u, c) in enumerate(zip(ranks, users, costs, strict=True)):
        if r != ranks[start]:  # a new run of one rank: every user starts again from their usage
            out += [line[k] for k in sorted(range(start, i), key=keys.__getitem__)]
            start, spent = i, dict(usage)
        before = spent.get(u, 0.0)
        spent[u] = before + c
        keys.append(before)
    out += [line[k] for k in sorted(range(start, n), key=keys.__getitem__)]
    return out
