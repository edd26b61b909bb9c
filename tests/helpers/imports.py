"""Which of pai_jupyter's own modules a source file imports, read from its AST (relative imports resolved), for
the tests that pin the layering."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pai_jupyter"


def own_imports(path: Path, source: str | None = None) -> list[str]:
    """The dotted ``pai_jupyter.…`` names ``path`` (or ``source``, as if it were there) imports; a
    ``from pkg import name`` also gives ``pkg.name``."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    here = path.relative_to(PACKAGE).parts[:-1]  # the package the file is in, below pai_jupyter/
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "pai_jupyter"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(here):
                    continue
                parts = ["pai_jupyter", *here[: len(here) - (node.level - 1)]]
                base = ".".join(parts + ([node.module] if node.module else []))
            elif (node.module or "").split(".")[0] == "pai_jupyter":
                base = node.module or ""
            else:
                continue
            found += [base] + [f"{base}.{a.name}" for a in node.names]
    return found


def layer_of(name: str) -> str | None:
    """``pai_jupyter.client.sync`` -> ``client``; a top-level module (``pai_jupyter.format``) -> ``format``; a name
    of the package's ``__init__`` (``pai_jupyter.__version__``) -> ``__init__``."""
    parts = name.split(".")
    if len(parts) < 2:
        return None
    if (PACKAGE / parts[1]).is_dir() or (PACKAGE / f"{parts[1]}.py").is_file():
        return parts[1]
    return "__init__"


def layer_imports(path: Path, source: str | None = None) -> set[str]:
    """The other layers (top-level packages or modules of pai_jupyter) ``path`` imports."""
    own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    return {layer for name in own_imports(path, source) if (layer := layer_of(name)) and layer != own}


def module_name(path: Path) -> str:
    """``…/pai_jupyter/protocol/model.py`` -> ``pai_jupyter.protocol.model``; a package's ``__init__.py`` -> the
    package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of pai_jupyter by its dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_edges(path: Path, known: set[str], source: str | None = None) -> dict[str, bool]:
    """The modules of ``known`` that ``path`` imports, each with whether every import of it is deferred (inside a
    function, so it runs only when called) rather than run when ``path`` is imported. ``from pkg import name``
    counts as an import of ``pkg.name`` when that is a module, else of ``pkg``. Imports under
    ``if TYPE_CHECKING:`` never run and are left out."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    edges: dict[str, bool] = {}

    def add(name: str, deferred: bool) -> None:
        while name and name not in known:  # ``import pai_jupyter.a.b`` of a name that is no module: its module
            name = name.rpartition(".")[0]
        if name and name != module_name(path):
            edges[name] = edges.get(name, True) and deferred

    def visit(node: ast.AST, deferred: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, deferred)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = own_imports(path, ast.unparse(node))
            if isinstance(node, ast.ImportFrom) and names:
                base = names[0]
                names = [n if n in known else base for n in names[1:]]
            for name in names:
                add(name, deferred)
            return
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return edges
