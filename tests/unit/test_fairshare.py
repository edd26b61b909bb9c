"""Fair share's pure parts (cluster/core/fairshare.py): the decaying usage against its definition, and the order
over random lines against a plain merge that takes the least-used user's next job each time, with the properties
the queue relies on (docs/queue.md, "Fair share")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pai_jupyter.cluster.core.fairshare import decayed, order, weight
from tests.properties import examples

H = 3600.0


@dataclass(frozen=True)
class J:
    id: int
    rank: int
    user: str
    cost: float


def fair(line: list[J], usage: dict[str, float]) -> list[J]:
    return order(line, [j.rank for j in line], [j.user for j in line], [j.cost for j in line], usage)


def merged(line: list[J], usage: dict[str, float]) -> list[J]:
    """The rule spelled out: within each run of one rank, take the user whose usage plus what their jobs placed so far
    cost is least (ties: the job earlier in line), one job at a time."""
    out: list[J] = []
    i = 0
    while i < len(line):
        run = [j for j in line[i:] if j.rank == line[i].rank]  # (the line is in rank order: one run)
        i += len(run)
        spent = {j.user: usage.get(j.user, 0.0) for j in run}
        left = list(run)
        while left:
            heads = {}
            for j in left:
                heads.setdefault(j.user, j)
            pick = min(heads.values(), key=lambda j: (spent[j.user], line.index(j)))
            out.append(pick)
            spent[pick.user] += pick.cost
            left.remove(pick)
    return out


@st.composite
def lines(draw: st.DrawFn) -> tuple[list[J], dict[str, float]]:
    n = draw(st.integers(0, 30))
    ranks = sorted(draw(st.lists(st.sampled_from((120, 100, 10, -1)), min_size=n, max_size=n)), reverse=True)
    users = draw(st.lists(st.sampled_from("abcd"), min_size=n, max_size=n))
    costs = draw(st.lists(st.sampled_from((0.0, 1.0, 2.5, 3600.0)), min_size=n, max_size=n))
    usage = draw(st.dictionaries(st.sampled_from("abcd"), st.sampled_from((0.0, 1.0, 5.0, 7200.0))))
    return [J(i, ranks[i], users[i], costs[i]) for i in range(n)], usage


@settings(max_examples=examples(2000), deadline=None)
@given(case=lines())
def test_the_order_is_the_least_used_users_next_job_each_time(case: tuple[list[J], dict[str, float]]) -> None:
    line, usage = case
    out = fair(line, usage)
    assert out == merged(line, usage)
    assert sorted(j.id for j in out) == [j.id for j in line]  # a permutation
    assert [j.rank for j in out] == [j.rank for j in line]  # classes never mix
    for u in "abcd":  # each user's own order is kept (an admin's place for a job included)
        assert [j.id for j in out if j.user == u] == [j.id for j in line if j.user == u]


def test_equal_users_alternate_and_the_less_used_goes_first() -> None:
    line = [J(i, 10, "a", 1.0) for i in range(3)] + [J(3 + i, 10, "b", 1.0) for i in range(3)]
    assert [j.user for j in fair(line, {})] == ["a", "b", "a", "b", "a", "b"]
    assert [j.user for j in fair(line, {"a": 1.5})] == ["b", "b", "a", "b", "a", "a"]
    prod = J(9, 100, "a", 1.0)  # a higher class stays ahead whatever its user used
    assert fair([prod, *line], {"a": 1e9})[0] == prod


def test_usage_decays_by_half_per_half_life_and_adds_up() -> None:
    assert decayed([(0.0, 100.0, 1.0)], 100.0, math.inf) == pytest.approx(100.0)  # no decay: weight x time
    ended = decayed([(0.0, 100.0, 2.0)], 100.0, H)
    assert decayed([(0.0, 100.0, 2.0)], 100.0 + H, H) == pytest.approx(ended / 2)
    assert ended == pytest.approx(2.0 * 100.0, rel=0.02)  # 100 s just now count almost whole
    split = decayed([(0.0, 40.0, 1.0), (40.0, 100.0, 1.0)], 500.0, H)
    assert split == pytest.approx(decayed([(0.0, 100.0, 1.0)], 500.0, H))
    assert decayed([(0.0, None, 1.0)], 50.0, H) == pytest.approx(decayed([(0.0, 50.0, 1.0)], 50.0, H))  # running
    assert decayed([(10.0, 5.0, 1.0), (0.0, 10.0, 0.0)], 20.0, H) == 0.0
    with pytest.raises(ValueError):
        decayed([], 0.0, 0.0)


def test_weight_is_the_dominant_share() -> None:
    assert weight((2, 1024, 0), (8, 8192, 2)) == pytest.approx(0.25)
    assert weight((1, 256, 1), (8, 8192, 2)) == pytest.approx(0.5)  # a GPU of two weighs half the cluster
    assert weight((1, 256, 1), (8, 8192, 0)) == pytest.approx(0.125)  # no GPUs here: they count nothing
