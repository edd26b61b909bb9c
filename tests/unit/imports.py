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
