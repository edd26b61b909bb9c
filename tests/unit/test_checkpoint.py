"""pai_jupyter.checkpoint with real processes: a process saving in a loop is SIGKILLed at random moments and the
latest checkpoint is whole every time; the preemption signal only sets the flag; a planted link is never
followed. And the toy trainers' verifier (tests/toytrainer/verify.py) on directories made to fail it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pai_jupyter import checkpoint
from tests.polling import wait_for
from tests.toytrainer.verify import verify

SAVER = textwrap.dedent(
    """
    import hashlib, os, sys
    from pai_jupyter import checkpoint
    step = (checkpoint.latest() or (-1, None))[0] + 1
    print("ready", flush=True)
    while True:
        body = os.urandom(20_000 + step % 7 * 10_000)
        checkpoint.save(hashlib.sha256(body).digest() + body, step)
        step += 1
    """
)


def whole(path: Path) -> bool:
    data = path.read_bytes()
    return hashlib.sha256(data[32:]).digest() == data[:32]


def test_a_saver_killed_at_any_moment_leaves_latest_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAI_CHECKPOINT_DIR", str(tmp_path))
    rng = random.Random(7)
    steps = []
    for _ in range(60):
        p = subprocess.Popen([sys.executable, "-c", SAVER], stdout=subprocess.PIPE, env=os.environ.copy())
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        wait_for(lambda: checkpoint.latest() is not None, 10)
        time.sleep(rng.uniform(0.001, 0.05))  # a random moment: somewhere in a save, or between two
        p.kill()
        p.wait()
        found = checkpoint.latest()
        assert found is not None and whole(found[1]), found
        steps.append(found[0])
        # the newest two, the one a save killed before its prune left, and one renamed just before the kill
        assert len(list(tmp_path.glob("ckpt-*"))) <= 4
    assert steps == sorted(steps) and steps[-1] > 60  # each saver went on from where the last one was killed
    checkpoint.save(b"after", steps[-1] + 1)  # a save that is not killed prunes what the killed ones left
    assert len(list(tmp_path.glob("ckpt-*"))) == 2


def test_the_signal_only_sets_the_flag(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import signal, sys, time
        from pai_jupyter import checkpoint
        seen = []
        signal.signal(signal.SIGUSR1, lambda *a: seen.append("before"))  # a handler that was there first
        checkpoint.watch()
        print(checkpoint.preempting(), flush=True)
        while not checkpoint.preempting():
            time.sleep(0.01)
        print(checkpoint.preempting(), seen, round(checkpoint.deadline() - time.monotonic()), flush=True)
        """
    )
    env = {**os.environ, "PAI_PREEMPT_SIGNAL": "USR1", "PAI_PREEMPT_GRACE_SECONDS": "40"}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None and p.stdout.readline() == "False\n"
    p.send_signal(signal.SIGUSR1)
    out, _ = p.communicate(timeout=10)
    assert out == "True ['before'] 40\n" and p.returncode == 0  # alive: the handler did nothing else


def test_latest_falls_back_to_the_newest_whole_and_follows_no_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PAI_CHECKPOINT_DIR", str(tmp_path))
    assert checkpoint.latest() is None and checkpoint.load() is None
    for step in (3, 10, 11):
        checkpoint.save(f"state {step}".encode(), step, keep=3)
    assert checkpoint.load() == (11, b"state 11")
    (tmp_path / "latest").unlink()
    (tmp_path / ".tmp-ckpt-000000000099-1-2").write_bytes(b"half")  # a save killed before its rename
    assert checkpoint.latest() == (11, tmp_path / "ckpt-000000000011")
    (tmp_path / "latest").symlink_to("/etc/passwd")  # planted: names a file outside, through a link
    assert checkpoint.load() == (11, b"state 11")
    (tmp_path / "latest").unlink()
    (tmp_path / "ckpt-000000000050").symlink_to("/etc/passwd")
    assert checkpoint.latest() == (11, tmp_path / "ckpt-000000000011")
    checkpoint.save(b"twelve", 12)  # keep=2: 10 and 3 go; the planted link is not a checkpoint of ours
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == [
        "ckpt-000000000011",
        "ckpt-000000000012",
        "ckpt-000000000050",
    ]
    assert checkpoint.load(lambda p: p.read_text()) == (12, "twelve")


def test_the_verifier_finds_a_torn_checkpoint_and_a_gap(tmp_path: Path) -> None:
    good = json.dumps({"step": 4, "total": 10, "sha256": hashlib.sha256(b"4 10").hexdigest()})
    (tmp_path / "ckpt-000000000004").write_text(good)
    (tmp_path / "ckpt-000000000009").write_text("step=9 total=45 sum=" + "0" * 64 + "\n")  # wrong sum
    (tmp_path / "latest").write_text("ckpt-000000000004")
    (tmp_path / "progress").mkdir()
    (tmp_path / "progress" / "0.log").write_text("resume -1\n0 1\n1 1\n2 1\n3 1\n4 1\nsaved 4\n5 1\n")
    (tmp_path / "progress" / "1.log").write_text("resume 4\n5 1\n7 1\n")  # step 6 never done
    report = verify(tmp_path)
    assert report.corrupt == ["ckpt-000000000009"] and not report.continuous
    assert report.lost == [0, 1] and report.attempts == {0: (-1, 5), 1: (4, 7)}
    (tmp_path / "progress" / "1.log").write_text("resume 4\n5 1\n6 1\n7 1\n")
    assert verify(tmp_path).continuous and verify(tmp_path, steps=9).continuous is False
