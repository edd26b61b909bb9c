"""pai_jupyter.checkpoint with real processes: a process saving in a loop is SIGKILLed at random moments and the
latest checkpoint is whole every time; the preemption signal only sets the flag (a save it interrupts completes); a
planted link is never followed. The toy trainers (tests/toytrainer/) preempted again and again, with a grace and
with SIGKILL, in Python and in dash and busybox sh, and their verifier on directories made to fail it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pai_jupyter import checkpoint
from tests.polling import wait_for
from tests.toytrainer.verify import verify

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ROOT / "tests" / "toytrainer"


@pytest.fixture(autouse=True)
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test's own checkpoint dir; and no preemption handler installed in pytest itself (``save`` would)."""
    monkeypatch.setenv("PAI_CHECKPOINT_DIR", f"{tmp_path}/")
    for var in ("PAI_PREEMPT_SIGNAL", "PAI_PREEMPT_GRACE_SECONDS", "PAI_CONTAINER_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(checkpoint, "_watched", True)
    yield tmp_path


SAVER = textwrap.dedent(
    """
    import hashlib, os
    from pai_jupyter import checkpoint
    step = (checkpoint.latest() or (-1, None))[0] + 1
    print("ready", flush=True)
    while True:
        body = os.urandom(20_000 + step % 7 * 10_000)
        checkpoint.save(hashlib.sha256(body).digest() + body, step)
        step += 1
    """
)


def whole(data: bytes) -> bool:
    return hashlib.sha256(data[32:]).digest() == data[:32]


KILLS = 50


def test_a_saver_killed_at_any_moment_leaves_latest_whole(here: Path) -> None:
    rng = random.Random(7)
    steps = []
    for _ in range(KILLS):
        start = (checkpoint.latest() or (-1, None))[0] + 1
        p = subprocess.Popen([sys.executable, "-c", SAVER], stdout=subprocess.PIPE, cwd=ROOT)
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        # its first save done, prune included (it points at its second): so at most 3 are left below
        wait_for(lambda s=start: (checkpoint.latest() or (-1, None))[0] > s, 10, interval=0.002)
        time.sleep(rng.uniform(0, 0.03))  # a random moment: somewhere in a save, or between two
        p.kill()
        p.wait()
        p.stdout.close()
        found = checkpoint.load()
        assert found is not None and isinstance(found[1], bytes) and whole(found[1]), found[0]
        steps.append(found[0])
        assert len(list(here.glob("ckpt-*"))) <= 3  # the newest two, and one a save killed before its prune left
    assert steps == sorted(steps) and steps[-1] > KILLS  # each saver went on from where the last one was killed
    assert len(list(here.glob(".tmp-*"))) >= 5  # kills that came in the middle of a write (about half of them)
    checkpoint.save(b"after", steps[-1] + 1)  # a save that is not killed prunes what the killed ones left
    assert len(list(here.glob("ckpt-*"))) == 2


def child(code: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
    )


def test_the_signal_only_sets_the_flag_and_a_save_it_interrupts_completes(here: Path) -> None:
    p = child(
        """
        import signal, sys, time
        from pai_jupyter import checkpoint
        seen = []
        signal.signal(signal.SIGUSR1, lambda *a: seen.append("before"))  # a handler that was there first
        print(checkpoint.preempting(), checkpoint.deadline(), flush=True)

        def slowly(p):
            with open(p, "wb") as f:
                print("writing", flush=True)
                for _ in range(20):
                    f.write(b"x" * 1000)
                    time.sleep(0.01)

        checkpoint.save(slowly, 3)
        print(checkpoint.preempting(), seen, round(checkpoint.deadline() - time.monotonic()), flush=True)
        print(checkpoint.load()[0], len(checkpoint.load()[1]), flush=True)
        """,
        PAI_PREEMPT_SIGNAL="usr1",
        PAI_PREEMPT_GRACE_SECONDS="40",
    )
    assert p.stdout is not None and p.stdout.readline() == "False None\n"
    assert p.stdout.readline() == "writing\n"
    p.send_signal(signal.SIGUSR1)
    out, _ = p.communicate(timeout=20)
    assert out == "True ['before'] 40\n3 20000\n" and p.returncode == 0  # alive: the handler did nothing else


def test_sigint_as_the_signal_raises_no_keyboard_interrupt(here: Path) -> None:
    p = child(
        """
        import time
        from pai_jupyter import checkpoint
        print(checkpoint.preempting(), flush=True)
        while not checkpoint.preempting():
            time.sleep(0.01)
        print("saved", checkpoint.save(b"s", 1).name, flush=True)
        """,
        PAI_PREEMPT_SIGNAL="SIGINT",
    )
    assert p.stdout is not None and p.stdout.readline() == "False\n"
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=20)
    assert out == "saved ckpt-000000000001\n" and p.returncode == 0


def test_only_the_standard_library_is_imported() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import pai_jupyter.checkpoint; "
        "print(sorted({m.split('.')[0] for m in sys.modules} - sys.stdlib_module_names - {'pai_jupyter', '__main__'}))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code, str(ROOT)], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


def test_the_variables_and_their_defaults(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert checkpoint.directory() == here and checkpoint.grace_seconds() == 30
    assert checkpoint.preempt_signal() == signal.SIGTERM and checkpoint.deadline() is None
    monkeypatch.setenv("PAI_PREEMPT_GRACE_SECONDS", "2.5")
    monkeypatch.setenv("PAI_PREEMPT_SIGNAL", "HUP")
    assert checkpoint.grace_seconds() == 2.5 and checkpoint.preempt_signal() == signal.SIGHUP
    monkeypatch.setenv("PAI_PREEMPT_GRACE_SECONDS", "soon")
    monkeypatch.setenv("PAI_PREEMPT_SIGNAL", "NOPE")
    assert checkpoint.grace_seconds() == 30 and checkpoint.preempt_signal() == signal.SIGTERM
    monkeypatch.delenv("PAI_CHECKPOINT_DIR")
    monkeypatch.chdir(here)
    assert checkpoint.directory() == Path("checkpoints") and (here / "checkpoints").is_dir()  # outside the platform
    with pytest.raises(ValueError):
        checkpoint.save(b"x", -1)


def test_latest_falls_back_to_the_newest_whole_and_follows_no_link(here: Path) -> None:
    assert checkpoint.latest() is None and checkpoint.load() is None and checkpoint.resume_path() is None
    for step in (3, 10, 11):
        checkpoint.save(f"state {step}".encode(), step, keep=3)
    assert checkpoint.load() == (11, b"state 11")
    assert checkpoint.resume_path() == str(here / "ckpt-000000000011")
    (here / "latest").unlink()
    (here / ".tmp-ckpt-000000000099-1-2").write_bytes(b"half")  # a save killed before its rename
    assert checkpoint.latest() == (11, here / "ckpt-000000000011")
    for junk in (b"ckpt-000000000012", b"\xff\xfe\x00", b"../../etc/passwd", b""):  # a missing one, not text, ...
        (here / "latest").write_bytes(junk)
        assert checkpoint.latest() == (11, here / "ckpt-000000000011"), junk
    (here / "latest").unlink()
    (here / "latest").mkdir()
    assert checkpoint.latest() == (11, here / "ckpt-000000000011")
    (here / "latest").rmdir()
    (here / "latest").symlink_to("/etc/passwd")  # planted: names a file outside, through a link
    assert checkpoint.load() == (11, b"state 11")
    (here / "latest").unlink()
    (here / "ckpt-000000000050").symlink_to("/etc/passwd")
    assert checkpoint.latest() == (11, here / "ckpt-000000000011")
    (here / "latest").write_text("ckpt-000000000050")  # a pointer naming the link is not followed either
    assert checkpoint.load() == (11, b"state 11")
    (here / "latest").unlink()
    (here / "latest").symlink_to(here / "elsewhere")  # a save replaces a planted link, never writes through it
    checkpoint.save(b"twelve", 12)  # keep=2: 10 and 3 go; the planted link is not a checkpoint of ours
    assert not (here / "elsewhere").exists() and not (here / "latest").is_symlink()
    assert sorted(p.name for p in here.glob("ckpt-*")) == [
        "ckpt-000000000011",
        "ckpt-000000000012",
        "ckpt-000000000050",
    ]
    assert checkpoint.load(lambda p: p.read_text()) == (12, "twelve")


def test_keep_prunes_the_older_ones(here: Path) -> None:
    for step in range(6):
        checkpoint.save(bytes([step]), step, keep=3)
    assert [p.name[-1] for p in sorted(here.glob("ckpt-*"))] == ["3", "4", "5"]
    for step in range(6, 9):
        checkpoint.save(bytes([step]), step, keep=0)  # 0: every one
    assert len(list(here.glob("ckpt-*"))) == 6
    checkpoint.save(b"again", 8, keep=1)  # the same step again: replaced
    assert [p.name for p in here.glob("ckpt-*")] == ["ckpt-000000000008"] and checkpoint.load() == (8, b"again")


def test_a_checkpoint_may_be_a_directory(here: Path) -> None:
    def pretrained(text: str) -> Any:
        def write(p: Path) -> None:  # like model.save_pretrained(p)
            (p / "shards").mkdir(parents=True)
            (p / "shards" / "0.bin").write_text(text)

        return write

    checkpoint.save(pretrained("a"), 1)
    checkpoint.save(b"file", 2)
    checkpoint.save(pretrained("c"), 3)
    checkpoint.save(pretrained("c2"), 3)  # saved again
    assert checkpoint.load(lambda p: (p / "shards" / "0.bin").read_text()) == (3, "c2")
    checkpoint.save(pretrained("d"), 4)
    assert sorted(p.name for p in here.iterdir()) == ["ckpt-000000000003", "ckpt-000000000004", "latest"]


def test_a_failed_write_leaves_no_temporary_and_the_pointer_as_it_was(here: Path) -> None:
    checkpoint.save(b"one", 1)

    def broken(p: Path) -> None:
        p.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(broken, 2)
    assert sorted(p.name for p in here.iterdir()) == ["ckpt-000000000001", "latest"]
    with pytest.raises(FileNotFoundError):  # np.save(p, ...) writes p + ".npy": told, not a checkpoint of nothing
        checkpoint.save(lambda p: p.with_suffix(".npy").write_bytes(b"x"), 2)


def test_temporaries_a_killed_save_left_go_once_stale(here: Path) -> None:
    old = time.time() - checkpoint.STALE_TEMP_S - 60
    (here / ".tmp-ckpt-000000000007-10-20").write_bytes(b"half")
    (here / ".tmp-ckpt-000000000008-10-20").mkdir()
    (here / ".tmp-ckpt-000000000008-10-20" / "shard").write_bytes(b"half")
    (here / "outside").mkdir()
    (here / "outside" / "keep").write_bytes(b"mine")
    (here / ".tmp-link-10-20").symlink_to(here / "outside")
    (here / ".tmp-ckpt-000000000009-11-20").write_bytes(b"being written")  # another process's, now
    for p in (".tmp-ckpt-000000000007-10-20", ".tmp-ckpt-000000000008-10-20", ".tmp-link-10-20"):
        os.utime(here / p, (old, old), follow_symlinks=False)
    checkpoint.save(b"x", 1)
    assert sorted(p.name for p in here.iterdir()) == [
        ".tmp-ckpt-000000000009-11-20",
        "ckpt-000000000001",
        "latest",
        "outside",
    ]
    assert (here / "outside" / "keep").read_bytes() == b"mine"


class FakeTrainer:
    def __init__(self, rank: int = 0, world: int = 1, anyone_preempted: bool = False) -> None:
        self.global_step = 0
        self.should_stop = False
        self.is_global_zero = rank == 0
        self.global_rank = rank
        self.world_size = world
        self.saved: list[str] = []

        def decide(decision: bool, all: bool = True) -> bool:  # any rank's decision, like Lightning's with all=False
            return decision or anyone_preempted

        self.strategy = types.SimpleNamespace(reduce_boolean_decision=decide)

    def save_checkpoint(self, path: str) -> None:
        self.saved.append(Path(path).name)
        if self.is_global_zero:
            Path(path).write_text(f"lightning {self.global_step}")


def test_the_lightning_callback(monkeypatch: pytest.MonkeyPatch, here: Path) -> None:
    """With a stand-in for lightning.pytorch (Lightning is not installed here): the callback's own logic."""
    lightning = types.ModuleType("lightning")
    pytorch = types.ModuleType("lightning.pytorch")
    pytorch.Callback = type("Callback", (), {})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lightning", lightning)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", pytorch)
    callback = checkpoint.lightning_callback(every_n_steps=3)
    trainer = FakeTrainer()
    for step in range(8):
        trainer.global_step = step
        callback.on_train_batch_end(trainer, None, None, None, step)
        callback.on_train_batch_end(trainer, None, None, None, step)  # gradient accumulation: the same step again
    assert checkpoint.load(lambda p: p.read_text()) == (6, "lightning 6") and len(trainer.saved) == 2
    assert not trainer.should_stop
    monkeypatch.setattr(checkpoint, "_preempted", True)
    callback.on_train_batch_end(trainer, None, None, None, 8)
    assert trainer.should_stop and checkpoint.resume_path() == str(here / "ckpt-000000000007")
    monkeypatch.setattr(checkpoint, "_preempted", False)
    other = FakeTrainer(rank=1, world=2, anyone_preempted=True)  # rank 0 got the signal: rank 1 joins its save
    other.global_step = 9
    checkpoint.lightning_callback().on_train_batch_end(other, None, None, None, 9)
    assert other.should_stop and other.saved == [".tmp-rank1"]
    assert checkpoint.latest() == (7, here / "ckpt-000000000007")


def test_the_lightning_callback_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "lightning", None)
    monkeypatch.setitem(sys.modules, "pytorch_lightning", None)
    with pytest.raises(ImportError, match="pip install lightning"):
        checkpoint.lightning_callback()


# ---- the toy trainers, preempted the way the platform does it: the signal to the task's process group -----------
EVERY = 4


def trainer_command(kind: str, steps: int, tmp: Path) -> list[str]:
    args = ["--steps", str(steps), "--every", str(EVERY), "--step-seconds", "0.005"]
    if kind == "python":
        return [sys.executable, str(TRAINERS / "train.py"), *args]
    script = tmp / "train.sh"
    script.write_text(f"set -- {' '.join(args)}\n{(TRAINERS / 'train.sh').read_text()}")
    return [*kind.split(), str(script)]


def steps_done(log: Path) -> int:
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for line in lines if line[:1].isdigit())


@pytest.mark.parametrize("kind", ["python", "dash", "busybox sh"])
def test_a_toy_trainer_preempted_again_and_again_draws_one_curve(
    kind: str, here: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if shutil.which(kind.split()[0]) is None:
        pytest.skip(f"no {kind} here")
    rng = random.Random(kind)
    tmp = tmp_path_factory.mktemp("script")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    graceful = [True] * 6 + [False] * 3
    for attempt, grace in enumerate(graceful):
        env["PAI_CONTAINER_ID"] = f"alice~my.a9.job.a{attempt}.main.0.t0"  # a name with ".a9." in it too
        p = subprocess.Popen(
            trainer_command(kind, 10**6, tmp), env=env, stdout=subprocess.DEVNULL, start_new_session=True
        )
        log = here / "progress" / f"{attempt}.log"
        wait_for(lambda p=p, log=log: steps_done(log) >= 2 or p.poll() is not None, 20, f"attempt {attempt}")
        time.sleep(rng.uniform(0, 0.03))  # somewhere in a step, a save, a prune
        os.killpg(p.pid, signal.SIGTERM if grace else signal.SIGKILL)
        assert p.wait(timeout=20) == (143 if grace else -9)
    env["PAI_CONTAINER_ID"] = f"alice~my.a9.job.a{len(graceful)}.main.0.t0"
    env["PAI_PREEMPT_SIGNAL"] = "USR1"
    report = verify(here)
    steps = report.last_step + 10
    done = subprocess.run(trainer_command(kind, steps, tmp), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.endswith("DONE\n"), done.stderr
    report = verify(here, steps=steps)
    assert report.corrupt == [] and report.checkpoints == 2 and report.continuous, report
    assert len(report.attempts) == len(graceful) + 1 and report.attempts[len(graceful)].last == steps - 1, report
    lost = report.lost[1:]  # after each attempt: none when it had the grace to save, at most a checkpoint interval
    assert all(n == 0 for n, g in zip(lost, graceful, strict=True) if g) and max(lost) <= EVERY, report
    said = [a.preempted for a in report.attempts.values()]
    assert said == [*graceful, False], report  # the last one ended DONE


def test_the_trainer_exits_as_killed_by_its_signal(here: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PAI_PREEMPT_SIGNAL": "USR1"}
    p = subprocess.Popen(trainer_command("python", 10**6, here), env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "resume -1\n" and p.stdout.readline().startswith("0 0 ")
    p.send_signal(signal.SIGUSR1)
    assert p.wait(timeout=20) == 128 + signal.SIGUSR1 and "preempted" in p.stdout.read()
    p.stdout.close()


# ---- the verifier, on directories made to fail it -------------------------------------------------------------
def py_ckpt(step: int) -> str:
    total = step * (step + 1) // 2
    return json.dumps({"step": step, "total": total, "sha256": hashlib.sha256(f"{step} {total}".encode()).hexdigest()})


def sh_ckpt(step: int) -> str:
    body = f"step={step} total={step * (step + 1) // 2}"
    line = body + "\n"  # what `echo BODY | sha256sum` sums
    return f"{body} sum={hashlib.sha256(line.encode()).hexdigest()}\n"


def progress(where: Path, attempt: int, resumed: int, steps: Iterable[int], *extra: str) -> None:
    (where / "progress").mkdir(exist_ok=True)
    lines = [f"resume {resumed}", *(f"{attempt} {s} 1700000000.0 0.5" for s in steps), *extra]
    (where / "progress" / f"{attempt}.log").write_text("".join(f"{line}\n" for line in lines))


def test_the_verifier_on_a_good_run_of_either_format(here: Path) -> None:
    (here / "ckpt-000000000004").write_text(py_ckpt(4))
    (here / "ckpt-000000000009").write_text(sh_ckpt(9))
    (here / "latest").write_text("ckpt-000000000009\n")
    progress(here, 0, -1, range(6), "saved 4", "preempted 4")
    progress(here, 1, 4, range(5, 12), "saved 9")  # SIGKILL: no "preempted"
    report = verify(here, steps=12)
    assert report.checkpoints == 2 and report.corrupt == [] and report.continuous and report.why == [], report
    assert report.lost == [0, 1] and report.last_step == 11
    assert [(a.resumed, a.first, a.last, a.saved, a.preempted) for a in report.attempts.values()] == [
        (-1, 0, 5, [4], True),
        (4, 5, 11, [9], False),
    ]
    assert not verify(here, steps=13).continuous  # step 12 was never done


def test_the_verifier_finds_what_is_wrong(here: Path) -> None:
    (here / "ckpt-000000000004").write_text(py_ckpt(4))
    (here / "ckpt-000000000005").write_text(py_ckpt(4))  # whole, but not the step its name says
    (here / "ckpt-000000000009").write_text(sh_ckpt(9)[:-10] + "0" * 9 + "\n")  # a wrong sum
    (here / "ckpt-000000000010").write_text(py_ckpt(10)[:20])  # torn
    (here / "latest").write_text("ckpt-000000000011")
    report = verify(here)
    assert report.corrupt == [
        "ckpt-000000000005",
        "ckpt-000000000009",
        "ckpt-000000000010",
        "latest -> a missing checkpoint",
    ]
    progress(here, 0, -1, range(8), "saved 4", "saved 7")
    progress(here, 1, 4, range(5, 9))  # resumed from an older checkpoint than the newest saved
    assert verify(here).why == ["attempt 1 resumed from step 4, older than saved 7"]
    progress(here, 1, 7, [8, 10])  # a step skipped
    assert "steps not one after the other" in verify(here).why[0]
    progress(here, 1, 12, range(13, 15))  # from a step no attempt reached
    assert verify(here).why[0] == "attempt 1 resumed from step 12, which no attempt reached"
    progress(here, 1, 7, range(8, 10), "resume 9")  # a task retried in the same attempt
    assert "a second run" in verify(here).why[0]
    progress(here, 1, 7, range(8, 10))
    assert verify(here).continuous and verify(here).lost == [0, 0]
