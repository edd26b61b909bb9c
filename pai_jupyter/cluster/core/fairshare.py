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

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    rank: Callable[[T], int],
    user: Callable[[T], str],
    cost: Callable[[T], float],
    usage: Mapping[str, float],
) -> list[T]:
    """The line (already in queue order: rank desc, then place) reordered for fair share: within each run of equal
    rank, users' own sub-lines (each kept in its order) are merged by least (usage[user] + cost of that user's jobs
    already placed earlier in this run); ties by the earlier original position. Ranks never mix; each user's own
    order is kept. O(n log users): a heap of one entry per user."""
    out: list[T] = []
    start = 0
    ranks = [rank(x) for x in line]
    while start < len(line):
        end = start
        while end < len(line) and ranks[end] == ranks[start]:
            end += 1
        out.extend(_merge(line, start, end, user, cost, usage))
        start = end
    return out


def _merge(
    line: Sequence[T],
    start: int,
    end: int,
    user: Callable[[T], str],
    cost: Callable[[T], float],
    usage: Mapping[str, float],
) -> list[T]:
    """One run of equal rank, ``line[start:end]``, merged by the users' usage so far."""
    places: dict[str, list[int]] = {}  # user -> the places of their jobs, in order
    for i in range(start, end):
        places.setdefault(user(line[i]), []).append(i)
    if len(places) == 1:
        return list(line[start:end])
    heap = [(usage.get(u, 0.0), p[0], u, 0) for u, p in places.items()]  # (score, place, user, index in theirs)
    heapq.heapify(heap)
    out: list[T] = []
    while heap:
        score, place, u, n = heapq.heappop(heap)
        job = line[place]
        out.append(job)
        if n + 1 < len(places[u]):
            heapq.heappush(heap, (score + cost(job), places[u][n + 1], u, n + 1))
    return out
