"""Where a job came from (common/origin.py): gathered in the user's process, sent beside the job, bounded."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pai_jupyter.common import origin


def _repo(folder: Path) -> str:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(folder)]
    folder.mkdir()
    (folder / "a.py").write_text("1\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run([*git, *args], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_git_state_says_the_commit_and_whether_tracked_files_changed(tmp_path: Path) -> None:
    commit = _repo(tmp_path / "r")
    assert origin.git_state(tmp_path / "r") == {"commit": commit, "dirty": False}
    (tmp_path / "r" / "a.py").write_text("2\n")
    assert origin.git_state(tmp_path / "r") == {"commit": commit, "dirty": True}
    (tmp_path / "plain").mkdir()
    assert origin.git_state(tmp_path / "plain") is None


def test_git_state_runs_no_code_the_repository_names(tmp_path: Path) -> None:
    """A repository's own config could name a file-system monitor (run by ``git status``): it is not run."""
    _repo(tmp_path / "r")
    mark = tmp_path / "ran"
    hook = tmp_path / "fsmonitor.sh"
    hook.write_text(f"#!/bin/sh\ntouch {mark}\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(tmp_path / "r"), "config", "core.fsmonitor", str(hook)], check=True)
    assert origin.git_state(tmp_path / "r") is not None
    assert not mark.exists()


def test_env_lock_hashes_the_first_lock_file(tmp_path: Path) -> None:
    assert origin.env_lock(tmp_path) is None
    (tmp_path / "requirements.txt").write_text("numpy\n")
    assert origin.env_lock(tmp_path).startswith("requirements.txt:sha256:")  # type: ignore[union-attr]
    (tmp_path / "uv.lock").write_text("version = 1\n")
    assert origin.env_lock(tmp_path).startswith("uv.lock:sha256:")  # type: ignore[union-attr]


def test_what_travels_is_only_known_keys_bounded() -> None:
    sent = {
        "via": "magic",
        "cell": "x" * 10_000,
        "notebook": "n.ipynb",
        "git": {"commit": "c" * 100, "dirty": True, "extra": 1},
        "planted": "no",
    }
    got = origin.decode(origin.encode(sent))
    assert got == {
        "via": "magic",
        "cell": "x" * origin.MAX_CELL,
        "notebook": "n.ipynb",
        "git": {"commit": "c" * 64, "dirty": True},
    }
    assert origin.decode("not base64 !") == {} and origin.decode(None) == {}
    assert origin.clean({"via": "elsewhere", "cell": 3}) == {}


def test_a_cells_secrets_never_reach_its_runs_tags() -> None:
    """``pai.cell`` shows the cell's own text, its ``secrets`` section masked as the job's config view masks it."""
    from pai_jupyter.notebook.magics import shown_cell

    cell = "protocolVersion: 2\nname: x\ntype: job\nsecrets:\n  token: hunter2\ntaskRoles: {}\n"
    shown = shown_cell("%%pai_submit --wait", cell, cell)
    assert shown is not None and shown.startswith("%%pai_submit --wait\n") and "hunter2" not in shown
    plain = "protocolVersion: 2\nname: '{name}'\n"  # placeholders, not the notebook's values
    assert shown_cell("%%pai_submit", plain, plain.replace("{name}", "real")) == f"%%pai_submit\n{plain}"
    assert shown_cell("%%pai_submit", "[1, 2", "[1, 2") is None
