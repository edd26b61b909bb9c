"""safeio reads what a task planted without following it: a symlink (as the file, as a directory on the way, or
as the directory itself), ``..``, a FIFO that would block the daemon's loop, a file bigger than asked for. Both
ways: openat2 and the per-component O_NOFOLLOW walk of kernels without it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pai_jupyter.common import safeio


@pytest.fixture(params=["openat2", "walk"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(safeio, "_openat2_ok", None if request.param == "openat2" else False)
    yield request.param


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.write_text("root's secret\n")
    d = tmp_path / "task"
    (d / "run").mkdir(parents=True)
    (d / "log").write_text("mine\n")
    (d / "run" / "big").write_bytes(b"x" * 100_000)
    (d / "link").symlink_to(secret)
    (d / "dirlink").symlink_to(tmp_path)
    (d / "run" / "hard").symlink_to("../../secret")
    os.mkfifo(d / "fifo")
    (tmp_path / "linked-task").symlink_to(d)
    return d


def test_reads_regular_files_beneath(mode: str, planted: Path) -> None:
    assert safeio.read_beneath(planted, "log") == b"mine\n"
    assert safeio.read_text_beneath(planted, "log") == "mine\n"
    assert safeio.size_beneath(planted, "run/big") == 100_000
    assert safeio.read_beneath(planted, "run/big", limit=10) == b"x" * 10
    assert safeio.read_range(planted, "run/big", 99_990, 100) == b"x" * 10
    assert safeio.is_file_beneath(planted, "log")


@pytest.mark.parametrize("name", ["link", "dirlink/secret", "run/hard", "../secret", "/etc/hostname", "fifo", "run"])
def test_refuses_what_a_task_planted(mode: str, planted: Path, name: str) -> None:
    assert safeio.read_beneath(planted, name) is None  # returns at once: a FIFO does not block
    assert safeio.size_beneath(planted, name) is None
    assert safeio.read_range(planted, name, 0, 10) == b""
    assert not safeio.is_file_beneath(planted, name)


def test_refuses_a_directory_that_is_itself_a_link(mode: str, planted: Path) -> None:
    assert safeio.read_beneath(planted.parent / "linked-task", "log") is None
    with pytest.raises(OSError):
        safeio.open_beneath(planted.parent / "linked-task", "log")
