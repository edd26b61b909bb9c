"""The documentation holds together: every relative link in the README, CONTRIBUTING, CHANGELOG and docs/ names a
file of this repository, and the site builds with ``mkdocs build --strict`` (a broken link or an anchor that no
heading makes fails it), as ``make docs`` builds it."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_name_files_of_this_repository(page: Path) -> None:
    assert page.exists(), f"{page.name} is missing"
    broken = [t for t in _relative_links(page) if not (page.parent / t.split("#")[0]).exists()]
    assert not broken, f"{page.relative_to(ROOT)} links to files that do not exist: {broken}"


def test_readme_is_a_landing_page() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150, "the README is the landing page: move reference material into docs/"
    for command in ("make lab", "make demo", "make test"):
        assert command in text.split("## One example")[0], f"the set-up commands are near the top: {command}"


def test_every_docs_page_is_in_the_site(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the test extras: pip install -e '.[test]'")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


SKIPS = {"skip", "skipif", "importorskip", "fail", "xfail"}
NAMED_FILE = re.compile(r"(?<![\w./{-])(\.ci/run|(?:[\w-]+/)*[\w-]+\.(?:md|sh|py|ya?ml|toml|mjs|json))(?![\w/])")
MAKE = re.compile(r"\bmake ([a-z][\w-]*)")


def _skip_messages() -> list[tuple[str, str]]:
    """(where, text) of every literal message of a pytest.skip / skipif / importorskip / fail / xfail in tests/."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SKIPS:
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg]
                    text = "".join(p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str))
                    if text:
                        found.append((f"{path.relative_to(ROOT)}:{node.lineno}", text))
    return found


def _repository_files() -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in {".git", ".venv", "node_modules", "lib", "site"}]
        rel = Path(dirpath).relative_to(ROOT)
        out |= {(rel / n).as_posix() for n in filenames} | set(filenames)
    return out


def test_skip_messages_name_files_and_make_targets_that_exist() -> None:
    """A skip says what to install or run: the file or ``make`` target it names must exist (one named a
    DESIGN.md this repository does not have)."""
    files = _repository_files()
    rules = re.findall(r"^([a-z][\w -]*):", (ROOT / "Makefile").read_text(), re.M)  # "venv install: ..."
    targets = {t for rule in rules for t in rule.split()}
    bad = []
    for where, text in _skip_messages():
        bad += [f"{where}: {name}" for name in NAMED_FILE.findall(text) if name not in files]
        bad += [f"{where}: make {t}" for t in MAKE.findall(text) if t not in targets]
    assert not bad, f"skip messages name what this repository does not have: {bad}"
