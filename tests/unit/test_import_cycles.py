"""No import cycles between pai_jupyter's modules, read from their source (``ast``), so each module can be read,
tested and moved with only what lies below it.

Imports are counted in two kinds. One run when the module is imported (module level, a class body, an ``if`` or
``try`` at the top): a cycle of these fails, since which of its modules loads first decides whether a name
exists yet. One inside a function (deferred: it runs at the first call): a cycle closed by such an import fails
too. It cannot leave a module half-built, but it is still a two-way dependency, and deferring one import is how
such a cycle hides (the job model imported its own v1/v2 readers inside its methods). A deferred import that
closes no cycle is fine: that is how ``import pai_jupyter``, ``pai --help`` and optional dependencies stay fast.
Imports under ``if TYPE_CHECKING:`` never run and are left out: a helper may name the type of the object that
hands itself in (``recovery.recover(cluster)``). Each failure names the modules of the cycle."""

from __future__ import annotations

from collections import deque
from itertools import pairwise

from tests.helpers.imports import PACKAGE, import_edges, modules

Graph = dict[str, dict[str, bool]]  # module -> {module it imports: every import of it deferred}

# cycles through deferred imports that another change owns, each with why it is still here; one that is gone
# must leave this list (the last test says so)
KNOWN: dict[frozenset[str], str] = {}  # a cycle left on purpose, with the way out; none today


def _graph() -> Graph:
    found = modules()
    return {name: import_edges(path, set(found)) for name, path in found.items()}


def _cycles(graph: Graph, *, deferred: bool) -> list[list[str]]:
    """The modules of each cycle among the imports of ``graph`` (only those run at import unless ``deferred``):
    each strongly connected part of more than one module, sorted."""
    edges = {m: sorted(t for t, d in out.items() if t in graph and (deferred or not d)) for m, out in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    parts: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components (the graph is a few hundred modules)
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                parts.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return sorted(parts)


def _closed_path(graph: Graph, part: list[str], deferred: bool) -> list[str]:
    """The shortest way from the part's first module back to itself, through the part: ``[a, b, a]``."""
    start, inside = part[0], set(part)
    edges = {m: sorted(t for t, d in graph[m].items() if t in inside and (deferred or not d)) for m in part}
    came: dict[str, str] = {}
    todo = deque([start])
    while todo:
        v = todo.popleft()
        for w in edges[v]:
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [start, *reversed(path[:-1]), start] if v != start else [start, start]
            if w in inside and w not in came:
                came[w] = v
                todo.append(w)
    raise AssertionError(f"{part} is not strongly connected")


def _named(graph: Graph, part: list[str], *, deferred: bool) -> str:
    """``a, b, c: a -> b -> a (deferred)``: the modules of the cycle, and one way round it as a reader looks for
    it."""
    path = _closed_path(graph, part, deferred)
    way = path[0]
    for a, b in pairwise(path):
        way += f" -> {b}" + (" (deferred)" if graph[a][b] else "")
    return f"{', '.join(part)}: {way}"


def test_no_cycle_among_imports_run_at_import() -> None:
    graph = _graph()
    assert [_named(graph, c, deferred=False) for c in _cycles(graph, deferred=False)] == []


def test_no_cycle_through_deferred_imports() -> None:
    graph = _graph()
    found = [c for c in _cycles(graph, deferred=True) if frozenset(c) not in KNOWN]
    assert [_named(graph, c, deferred=True) for c in found] == []


def _between_siblings(graph: Graph) -> Graph:
    """The imports between the parts of each package: ``cluster.core.launching -> cluster.task.env`` is an
    import of ``cluster.task`` by ``cluster.core`` (siblings in ``cluster``), ``cluster.core.state ->
    cluster.paths`` one of the module ``cluster.paths``. A package's own ``__init__`` and its parts are left out:
    that a package gathers its parts is no cycle."""
    out: Graph = {}
    for a, targets in graph.items():
        for b, deferred in targets.items():
            pa, pb = a.split("."), b.split(".")
            i = next((i for i, (x, y) in enumerate(zip(pa, pb, strict=False)) if x != y), min(len(pa), len(pb)))
            if i < len(pa) and i < len(pb):
                na, nb = ".".join(pa[: i + 1]), ".".join(pb[: i + 1])
                out.setdefault(nb, {})
                seen = out.setdefault(na, {})
                seen[nb] = seen.get(nb, True) and deferred
    return out


def test_no_cycle_between_the_packages_of_a_package() -> None:
    """``cluster/core`` uses ``cluster/task`` (what a task is made of), never the other way round: two packages
    that import each other are one package in two folders."""
    graph = _between_siblings(_graph())
    found = [c for c in _cycles(graph, deferred=True) if frozenset(c) not in KNOWN]
    assert [_named(graph, c, deferred=True) for c in found] == []


def test_each_known_cycle_is_still_there() -> None:
    """A cycle listed in KNOWN that has been taken apart leaves the list, so the list never excuses a new one."""
    cycles = {frozenset(c) for c in _cycles(_graph(), deferred=True)}
    assert [sorted(k) for k in KNOWN if k not in cycles] == []


def test_the_check_can_fail() -> None:
    """Three probe modules (sources given, never written): a cycle closed inside a function is found by the
    deferred check only; one closed under ``if TYPE_CHECKING:`` by neither; one at module level by both. Two
    packages whose modules import each other's (no module cycle) are a cycle between packages."""
    here = PACKAGE / "protocol"
    names = {f"pai_jupyter.protocol.{n}" for n in ("a", "b", "c")}
    sources = {
        "a": "from . import b\n",
        "b": "def later():\n    from .a import x\n",
        "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import x\n",
    }
    graph = {f"pai_jupyter.protocol.{n}": import_edges(here / f"{n}.py", names, s) for n, s in sources.items()}
    a, b = "pai_jupyter.protocol.a", "pai_jupyter.protocol.b"
    assert _cycles(graph, deferred=False) == []
    assert _cycles(graph, deferred=True) == [[a, b]]
    assert _named(graph, [a, b], deferred=True) == f"{a}, {b}: {a} -> {b} -> {a} (deferred)"
    graph[b][a] = False  # the same import at module level
    assert _cycles(graph, deferred=False) == [[a, b]]
    nested = {"pai_jupyter.p.x.m": {"pai_jupyter.p.y.n": False}, "pai_jupyter.p.y.k": {"pai_jupyter.p.x.j": True}}
    nested |= {"pai_jupyter.p.y.n": {}, "pai_jupyter.p.x.j": {}, "pai_jupyter.p": {"pai_jupyter.p.x.m": False}}
    assert _cycles(_between_siblings(nested), deferred=True) == [["pai_jupyter.p.x", "pai_jupyter.p.y"]]
