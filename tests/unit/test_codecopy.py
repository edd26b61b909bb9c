"""What of a source folder is a job's code (cluster/task/codecopy.py): the rules beyond those the integration test
(tests/integration/test_job_code.py) runs through the daemon."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pai_jupyter.cluster.task import codecopy


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_ignore_files_nest_as_gits_and_paiignore_takes_back(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".gitignore": "*.log\nout/\n",
            ".paiignore": "!keep.log\n",  # read after .gitignore: takes back what git ignores
            "a.log": "",
            "keep.log": "",
            "out/x": "",
            "sub/.gitignore": "!b.log\nlocal.txt\n",  # a deeper folder's file decides below it
            "sub/b.log": "",
            "sub/c.log": "",
            "sub/local.txt": "",
            "sub/code.py": "",
            "other/local.txt": "",
        },
    )
    sel = codecopy.select(tmp_path)
    assert sorted(sel.files) == sorted(
        [".gitignore", ".paiignore", "keep.log", "sub/.gitignore", "sub/b.log", "sub/code.py", "other/local.txt"]
    )


def test_environments_and_caches_are_left_out_unless_taken_back(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "myenv/pyvenv.cfg": "",  # a virtualenv by its marker, whatever its name
            "myenv/lib/x.py": "",
            "conda/conda-meta/history": "",
            "node_modules/a.js": "",
            "web/node_modules/b.js": "",
            "web/.paiignore": "!node_modules/\n",
            "__pycache__/m.pyc": "",
            "m.py": "",
        },
    )
    assert sorted(codecopy.select(tmp_path).files) == ["m.py", "web/.paiignore", "web/node_modules/b.js"]


def test_homes_job_dirs_and_vcs_are_never_copied(tmp_path: Path) -> None:
    own = tmp_path / "elsewhere-named-home"
    _tree(
        tmp_path,
        {
            "elsewhere-named-home/local/x": "",  # the daemon's own home, by identity (no marker needed)
            "other-home/local/state.db": "",  # another cluster's home, by its files
            "copied/alice~job1/output/logs/x": "",  # a job's directory
            ".git/config": "",
            "code.py": "",
            ".paiignore": "!.git/\n!other-home/\n",  # cannot take these back
        },
    )
    sel = codecopy.select(tmp_path, skip=[own])
    assert sorted(sel.files) == [".paiignore", "code.py"]
    assert sorted(sel.left_out) == [
        "copied/alice~job1/ (a job's directory)",
        "elsewhere-named-home/ (the cluster's home)",
        "other-home/ (a cluster's home)",
    ]


def test_links_are_copied_as_links_never_followed(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    _tree(src, {"a.py": "x", "data/big": "y" * 100})
    os.symlink("/etc", src / "etc-link")
    os.symlink(src / "data", src / "data-link")
    sel = codecopy.select(src)
    assert "etc-link" in sel.files and sel.size == 101  # a link counts nothing, its target is not walked
    codecopy.copy(sel, dest)
    assert os.readlink(dest / "etc-link") == "/etc" and (dest / "data-link").is_symlink()
    assert (dest / "data" / "big").read_text() == "y" * 100


def test_too_many_files_names_where_they_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecopy, "MAX_FILES", 5)
    _tree(tmp_path, {**{f"many/{i}": "" for i in range(8)}, "one.py": ""})
    with pytest.raises(
        codecopy.CodeTooBig, match=r"9 files, over the limit of 5; the biggest entries: many/ \(8 files\)"
    ):
        codecopy.select(tmp_path)
