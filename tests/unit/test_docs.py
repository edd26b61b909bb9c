"""The documentation holds together: every relative link in the README, CONTRIBUTING, CHANGELOG and docs/ names a
file of this repository, and the site builds with ``mkdocs build --strict`` (a broken link or an anchor that no
heading makes fails it), as ``make docs`` builds it."""

from __future__ import annotations

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
