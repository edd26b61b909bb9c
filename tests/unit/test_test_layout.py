"""Where the tests' shared code lives (tests/README.md): a module under tests/ imports what it shares with others
from tests/helpers/, never from a ``test_*.py`` module or a conftest, and unit/ and integration/ hold tests only.
Importing a test module runs its module-level code again and hands its fixtures to the importer by accident; pytest
imports a conftest itself, and a helper kept there is shared with every test of its folder whether they ask or not.
The skip messages' named files are checked in test_docs.py
(test_skip_messages_name_files_and_make_targets_that_exist)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
TESTS = ROOT / "tests"


def _forbidden(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1]
    return last.startswith(("test_", "conftest"))


def _resolved(module: str | None, level: int, here: str) -> str:
    """The module an import of ``module`` at ``level`` (the number of leading dots) means in the module ``here``."""
    if not level:
        return module or ""
    return ".".join(here.split(".")[:-level] + ([module] if module else []))


def imports_of_test_modules(source: str, here: str) -> list[str]:
    """The imports in ``source`` (the module ``here``, dotted, which relative imports start from) of a ``test_*`` or
    ``conftest*`` module: ``from .test_x import y``, ``from . import test_x``, ``import tests.unit.test_x``, and those
    in a string of code (a script a test runs in a subprocess). A conftest's ``pytest_*`` hooks may be imported (a
    conftest of a generated suite reuses tests/conftest.py's)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = _resolved(node.module, node.level, here)
            names = [a.name for a in node.names]
            hooks_only = all(n.startswith("pytest_") for n in names)
            if (_forbidden(base) and not hooks_only) or any(_forbidden(f"{base}.{n}") for n in names):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: {ast.unparse(node)}" for a in node.names if _forbidden(a.name)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
            try:
                inner = imports_of_test_modules(node.value, here)
            except SyntaxError:  # prose, or code of another language
                continue
            found += [f"line {node.lineno}, in a string: {i}" for i in inner]
    return found


def _modules() -> list[Path]:
    """Every module under tests/ but this one (its examples below are strings of forbidden imports)."""
    here = Path(__file__).resolve()
    return sorted(p for p in TESTS.rglob("*.py") if "node_modules" not in p.parts and p.resolve() != here)


def test_no_module_under_tests_imports_a_test_module_or_a_conftest() -> None:
    bad = []
    for path in _modules():
        here = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        bad += [f"{path.relative_to(ROOT)} {found}" for found in imports_of_test_modules(path.read_text(), here)]
    assert not bad, "import these from tests/helpers/ (move the helper there first):\n" + "\n".join(bad)


def test_the_test_folders_hold_tests_only() -> None:
    """A helper module beside the tests would be a second home for shared code: it belongs in tests/helpers/."""
    folders = [TESTS / "unit", TESTS / "integration"]
    beside = [p for f in folders for p in f.glob("*.py") if not p.name.startswith(("test_", "conftest", "__init__"))]
    assert not beside, "move these into tests/helpers/ (one module per subject):\n" + "\n".join(map(str, beside))


@pytest.mark.parametrize(
    "source",
    [
        "from .test_cli import pai",
        "from tests.integration.test_cli import PAI, pai",
        "from . import test_cli",
        "from .. import unit\nfrom ..unit import test_sweep",
        "import tests.unit.test_sweep as sweep",
        "from .conftest import Api",
        "from .conftest_runtime import make_spec",
        "from tests.integration.conftest import account_of, pytest_runtest_setup",
        "def f():\n    from .test_desktop import need_desktop\n",
        'DRIVER = """\nimport sys\nfrom tests.integration.test_sweeps import template\n"""',
    ],
)
def test_the_check_finds_an_import_of_a_test_module(source: str) -> None:
    assert imports_of_test_modules(source, "tests.integration.test_here")


@pytest.mark.parametrize(
    "source",
    [
        "from tests.helpers.cli import pai",
        "from tests.helpers.browser import opened\nfrom ..slurm.fixture import node_addrs",
        "from tests.helpers.lab import env, lab_page  # noqa: F401",
        "from tests.conftest import pytest_collection_modifyitems",
        "import pytest\nimport tests.polling",
        'WHY = "the import of test_cli is prose here: (not code"',
    ],
)
def test_the_check_passes_imports_of_helpers(source: str) -> None:
    assert imports_of_test_modules(source, "tests.integration.test_here") == []


def test_a_relative_import_resolves_from_the_importing_module() -> None:
    assert _resolved("test_cli", 1, "tests.integration.test_here") == "tests.integration.test_cli"
    assert _resolved("unit.test_sweep", 2, "tests.integration.test_here") == "tests.unit.test_sweep"
    assert _resolved(None, 1, "tests.integration.test_here") == "tests.integration"
