"""Which running jobs are preempted for the waiting heads (cluster/core/preemptplan.py), over random small clusters
of three virtual clusters checked against the rules replayed head by head (``replay``): each head fits after its
victims go and no victim is spared, only lower classes or borrowed room are taken, a borrowing head takes nobody,
nobody twice nor past the hourly limit, no freed room counted twice, the most preferred victims first. Then a few
worked examples."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from pai_jupyter.cluster.core.backfill import ZERO, Res, add, fits, least, sub
from pai_jupyter.cluster.core.preemptplan import Head, Preemption, Running, choose
from pai_jupyter.cluster.core.queue import PRIORITY_CLASSES
from tests.properties import examples

VCS = ("a", "b", "c")
OPPO, TEST, PROD, CRIT = (PRIORITY_CLASSES[c] for c in ("oppo", "test", "prod", "crit"))
RUNNING_RANKS = (OPPO, TEST, PROD, CRIT, OPPO, TEST)  # mostly low classes running, high ones waiting
HEAD_RANKS = (CRIT, PROD, TEST, PROD, CRIT, OPPO)
MEMORY = (256, 512, 1024)


@dataclass
class Case:
    total: Res
    quotas: dict[str, Res]
    running: list[Running]
    leaving: list[tuple[str, Res]]
    heads: list[Head]
    max_per_hour: int


demands = st.tuples(st.integers(0, 2), st.sampled_from((0, *MEMORY)), st.integers(0, 2))
needs = st.tuples(st.integers(1, 4), st.sampled_from(MEMORY), st.integers(0, 2))


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A machine, quotas that share it (each up to the whole machine), running and leaving jobs that fit both,
    and a few heads."""
    total = (draw(st.integers(2, 8)), draw(st.sampled_from((2048, 4096))), draw(st.sampled_from((2, 4, 1, 0))))
    quotas = {vc: tuple(draw(st.integers(t // 2, t)) for t in total) for vc in VCS}
    used, used_vc = ZERO, dict.fromkeys(VCS, ZERO)
    running, leaving = [], []
    for i in range(draw(st.integers(3, 14))):  # mostly a full machine
        vc = draw(st.sampled_from(VCS))
        demand = least(draw(demands), least(sub(quotas[vc], used_vc[vc]), sub(total, used)))
        if demand == ZERO:
            continue  # what runs fits its quota and the machine (so the machine fills up)
        used, used_vc[vc] = add(used, demand), add(used_vc[vc], demand)
        if draw(st.integers(0, 4)) == 0:
            leaving.append((vc, demand))
            continue
        running.append(
            Running(
                id=i,
                vc=vc,
                user=draw(st.sampled_from(("ann", "bob"))),
                rank=draw(st.sampled_from(RUNNING_RANKS)),
                demand=demand,
                started=float(draw(st.integers(0, 5))),  # ties on purpose: the id breaks them
                borrowed=draw(st.integers(0, 3)) == 0,
                preempted_recently=draw(st.sampled_from((0, 0, 0, 1, 2, 3))),
                interactive=draw(st.booleans()),
            )
        )
    heads = []
    for i in range(draw(st.integers(0, 4))):
        vc, need = draw(st.sampled_from(VCS)), draw(needs)
        if draw(st.integers(0, 5)):
            need = least(need, quotas[vc])  # mostly one that can fit at all
        rank, borrowing = draw(st.sampled_from(HEAD_RANKS)), draw(st.integers(0, 5)) == 0
        heads.append(Head(id=100 + i, vc=vc, rank=rank, need=need, borrowing=borrowing))
    return Case(total, quotas, running, leaving, heads, draw(st.sampled_from((3, 3, 1, 0))))


def preference(r: Running) -> tuple[bool, int, bool, float, int]:
    return (not r.borrowed, r.rank, r.interactive, -r.started, -r.id)


def eligible(r: Running, head: Head, max_per_hour: int) -> bool:
    return not head.borrowing and r.preempted_recently < max_per_hour and (r.rank < head.rank or r.borrowed)


def replay(case: Case, result: list[Preemption]) -> None:
    """Check ``result`` head by head, highest class first, as the module's docstring says it is made."""
    by_id = {r.id: r for r in case.running}
    assert len({p.victim for p in result}) == len(result), "a victim twice"
    assert {p.preemptor for p in result} <= {h.id for h in case.heads}
    victims_of: dict[int, list[Running]] = {}
    for p in result:
        victims_of.setdefault(p.preemptor, []).append(by_id[p.victim])
    used, used_vc = ZERO, dict.fromkeys(VCS, ZERO)
    for r in case.running:  # (leaving: freed)
        used, used_vc[r.vc] = add(used, r.demand), add(used_vc[r.vc], r.demand)
    gone: set[int] = set()

    def fits_without(head: Head, victims: list[Running]) -> bool:
        free_vc = sub(case.quotas[head.vc], used_vc[head.vc])
        free = sub(case.total, used)
        for v in victims:
            free = add(free, v.demand)
            if v.vc == head.vc:
                free_vc = add(free_vc, v.demand)
        return fits(head.need, least(free_vc, free))

    for head in sorted(case.heads, key=lambda h: -h.rank):
        victims = victims_of.get(head.id, [])
        candidates = [r for r in case.running if r.id not in gone and eligible(r, head, case.max_per_hour)]
        if fits_without(head, []):
            assert not victims, "a head that fits (once the leaving jobs are gone) preempted"
        elif not victims:
            assert head.borrowing or not fits_without(head, candidates), "the candidates make it fit: none taken"
            continue  # it waits: takes no room
        else:
            assert not head.borrowing
            assert all(v in candidates for v in victims), "a victim not of a lower class nor borrowed, or gone"
            assert victims == sorted(victims, key=preference)
            assert fits_without(head, victims), "does not fit after its victims are gone"
            for v in victims:
                assert not fits_without(head, [w for w in victims if w is not v]), f"victim {v.id} not needed"
            for c in candidates:  # one candidate that alone makes it fit: nothing we would rather spare is taken
                if fits_without(head, [c]):
                    assert all(preference(v) <= preference(c) for v in victims)
                    if c.rank == OPPO:
                        assert not any(v.rank >= PROD and not v.borrowed for v in victims)
            for v in victims:
                gone.add(v.id)
                used, used_vc[v.vc] = sub(used, v.demand), sub(used_vc[v.vc], v.demand)
        used, used_vc[head.vc] = add(used, head.need), add(used_vc[head.vc], head.need)
        # every head placed so far fits at once: no freed room counted twice
        assert fits(used, case.total) and fits(used_vc[head.vc], case.quotas[head.vc])


@settings(max_examples=examples(2000), deadline=None)
@given(case=cases())
def test_random_clusters_preempt_by_the_rules(case: Case) -> None:
    result = choose(case.total, case.quotas, case.running, case.leaving, case.heads, case.max_per_hour)
    replay(case, result)
    by_id = {r.id: r for r in case.running}
    for p in result:
        assert by_id[p.victim].preempted_recently < case.max_per_hour
        assert ("borrowed" in p.reason) == by_id[p.victim].borrowed


@settings(max_examples=examples(300), deadline=None)
@given(case=cases())
def test_once_the_victims_are_leaving_the_next_pass_preempts_nobody_more(case: Case) -> None:
    """The pass after: the victims are on their way out, what the heads need is not yet taken; nobody new goes."""
    result = choose(case.total, case.quotas, case.running, case.leaving, case.heads, case.max_per_hour)
    gone = {p.victim for p in result}
    preemptors = {p.preemptor for p in result}
    running = [r for r in case.running if r.id not in gone]
    leaving = case.leaving + [(r.vc, r.demand) for r in case.running if r.id in gone]
    heads = [h for h in case.heads if h.id in preemptors]
    assert choose(case.total, case.quotas, running, leaving, heads, case.max_per_hour) == []


def test_a_crit_job_preempts_the_oppo_job_it_waits_behind() -> None:
    total = (2, 4096, 2)
    oppo = Running(1, "default", "bob", OPPO, (2, 2048, 2), started=100.0)
    crit = Head(10, "default", PRIORITY_CLASSES["crit"], (1, 1024, 1))
    assert choose(total, {"default": total}, [oppo], [], [crit]) == [Preemption(1, 10, "a crit job needs 1 CPU, 1 GPU")]
    # a test job may not; nor may the crit job once the oppo job is leaving, nor past the hourly limit
    test = Head(11, "default", PRIORITY_CLASSES["test"], (1, 1024, 1))
    assert choose(total, {"default": total}, [Running(2, "default", "ann", PROD, (2, 0, 2), 1.0)], [], [test]) == []
    assert choose(total, {"default": total}, [], [("default", (2, 2048, 2))], [crit]) == []
    worn = Running(1, "default", "bob", OPPO, (2, 2048, 2), 100.0, preempted_recently=3)
    assert choose(total, {"default": total}, [worn], [], [crit]) == []


def test_a_gang_job_goes_whole_and_what_it_frees_serves_the_next_head_too() -> None:
    """The gang job (two tasks of 1 CPU, 1 GPU) frees both GPUs: the crit head needs one, the prod head of
    another virtual cluster the other, with no second victim; the small job that does not help is let go."""
    total = (3, 4096, 2)
    gang = Running(1, "a", "bob", OPPO, (2, 2048, 2), started=100.0)
    small = Running(2, "b", "bob", OPPO, (1, 512, 0), started=200.0)  # preferred (newer), but not needed
    crit = Head(10, "a", PRIORITY_CLASSES["crit"], (1, 512, 1))
    prod = Head(11, "b", PROD, (1, 512, 1))
    quotas = {"a": total, "b": total}
    result = choose(total, quotas, [gang, small], [], [prod, crit])
    assert [(p.victim, p.preemptor) for p in result] == [(1, 10)]


def test_an_interactive_job_goes_last_among_equals() -> None:
    total = (2, 1024, 2)
    kernel = Running(1, "default", "ann", OPPO, (1, 512, 1), started=200.0, interactive=True)
    batch = Running(2, "default", "bob", OPPO, (1, 512, 1), started=100.0)
    head = Head(10, "default", PROD, (1, 512, 1))
    assert [p.victim for p in choose(total, {"default": total}, [kernel, batch], [], [head])] == [2]
    # both needed: both go
    two = Head(10, "default", PROD, (2, 1024, 2))
    assert [p.victim for p in choose(total, {"default": total}, [kernel, batch], [], [two])] == [2, 1]


def test_borrowed_room_goes_to_any_job_within_quota_but_a_borrowing_head_takes_nothing() -> None:
    total = (2, 1024, 0)
    borrowed = Running(1, "default", "bob", PROD, (2, 512, 0), started=1.0, borrowed=True)
    head = Head(10, "default", PRIORITY_CLASSES["test"], (1, 256, 0))
    (p,) = choose(total, {"default": total}, [borrowed], [], [head])
    assert p.victim == 1 and p.reason == "over its user's quota (borrowed), a test job within quota needs 1 CPU"
    assert choose(total, {"default": total}, [borrowed], [], [Head(10, "default", 120, (1, 256, 0), True)]) == []


def test_a_head_the_quota_bounds_is_helped_only_by_its_own_virtual_clusters_jobs() -> None:
    """Virtual cluster a's quota is full: an oppo job of b frees machine room but not a's quota."""
    total = (4, 4096, 0)
    quotas = {"a": (2, 4096, 0), "b": (2, 4096, 0)}
    mine = Running(1, "a", "ann", PRIORITY_CLASSES["test"], (2, 256, 0), 1.0)
    theirs = Running(2, "b", "bob", OPPO, (2, 256, 0), 2.0)
    head = Head(10, "a", PROD, (1, 256, 0))
    assert [p.victim for p in choose(total, quotas, [mine, theirs], [], [head])] == [1]
