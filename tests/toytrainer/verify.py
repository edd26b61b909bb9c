"""What the toy trainers (train.py, train.sh) left in a job's checkpoint directory, checked from the host: every
checkpoint complete and self-consistent, and the steps of all attempts together one unbroken curve.

``verify(dir, steps)`` reads each ``ckpt-*`` (the JSON of train.py or the ``step= total= sum=`` line of train.sh),
the ``latest`` pointer and the progress logs (``progress/<attempt>.log``: ``resume <step>`` first, then
``<attempt> <step> <time> <loss>`` per step done, ``saved <step>`` after each checkpoint, ``preempted <last saved
step>`` when it was)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Attempt:
    resumed: int  # the step of the checkpoint it resumed from (-1: none)
    first: int = -1  # the first and last step it did (-1: none)
    last: int = -1
    saved: list[int] = field(default_factory=list)
    preempted: bool = False  # it said so as it stopped (not when SIGKILL came first)


@dataclass
class Report:
    checkpoints: int = 0  # ckpt-* seen
    corrupt: list[str] = field(default_factory=list)  # names of those torn or inconsistent (must be none)
    attempts: dict[int, Attempt] = field(default_factory=dict)
    lost: list[int] = field(default_factory=list)  # per resume (the first attempt's too): steps done again
    continuous: bool = False
    why: list[str] = field(default_factory=list)  # what broke the curve, in words
    last_step: int = -1


def _sha256_line(text: str) -> str:
    """What ``echo TEXT | sha256sum`` prints (train.sh's sum)."""
    return hashlib.sha256(f"{text}\n".encode()).hexdigest()


def check(path: Path) -> int | None:
    """The step a checkpoint holds, or None when it is not whole and consistent (either trainer's format)."""
    raw = path.read_bytes()
    try:
        state = json.loads(raw)
        want = hashlib.sha256(f"{state['step']} {state['total']}".encode()).hexdigest()
        ok = state["sha256"] == want and state["total"] == state["step"] * (state["step"] + 1) // 2
        return int(state["step"]) if ok else None
    except (ValueError, KeyError, TypeError):
        pass
    m = re.fullmatch(rb"(step=(\d+) total=(\d+)) sum=([0-9a-f]{64})\n", raw)
    if not m:
        return None
    step, total = int(m.group(2)), int(m.group(3))
    ok = _sha256_line(m.group(1).decode()) == m.group(4).decode() and total == step * (step + 1) // 2
    return step if ok else None


def _read_log(log: Path) -> Attempt:
    lines = [line.split() for line in log.read_text().splitlines() if line.strip()]
    if not lines or lines[0][0] != "resume":
        raise ValueError(f"{log}: no resume line first")
    a = Attempt(resumed=int(lines[0][1]))
    steps = []
    for words in lines[1:]:
        if words[0] == "saved":
            a.saved.append(int(words[1]))
        elif words[0] == "preempted":
            a.preempted = True
        elif words[0] == "resume":
            raise ValueError(f"{log}: a second run in one attempt (a task retried)")
        else:
            steps.append(int(words[1]))
    a.first, a.last = (steps[0], steps[-1]) if steps else (-1, -1)
    if steps != list(range(a.resumed + 1, a.resumed + 1 + len(steps))):
        raise ValueError(f"{log}: steps not one after the other from {a.resumed + 1}")
    return a


def verify(where: Path, steps: int | None = None) -> Report:
    """``steps``: how many the trainer was to do (None: it was stopped; every step up to the last one done). The
    curve is continuous when each attempt did its steps one after the other from the step after the checkpoint it
    resumed from, that checkpoint was one an earlier attempt made (or at least a step it did: a SIGKILL may come
    between the rename and the ``saved`` line) and no older than the newest one an earlier attempt said it saved,
    and the attempts' steps together are 0 .. steps - 1."""
    report = Report()
    for p in sorted(where.glob("ckpt-*")):
        report.checkpoints += 1
        if check(p) != int(p.name.removeprefix("ckpt-")):
            report.corrupt.append(p.name)
    pointer = where / "latest"
    if pointer.exists() and not (where / pointer.read_text().strip()).is_file():
        report.corrupt.append("latest -> a missing checkpoint")
    done: set[int] = set()
    saved: set[int] = {-1}  # -1: the start
    for log in sorted((where / "progress").glob("*.log"), key=lambda p: int(p.stem)):
        try:
            a = _read_log(log)
        except (ValueError, IndexError) as e:
            report.why.append(str(e))
            continue
        report.attempts[int(log.stem)] = a
        if a.resumed not in saved | done:
            report.why.append(f"attempt {log.stem} resumed from step {a.resumed}, which no attempt reached")
        if a.resumed < max(saved):
            report.why.append(f"attempt {log.stem} resumed from step {a.resumed}, older than saved {max(saved)}")
        report.lost.append(max(done, default=-1) - a.resumed)
        saved.update(a.saved)
        done.update(range(a.first, a.last + 1) if a.first >= 0 else [])
    report.last_step = max(done, default=-1)
    want = set(range(report.last_step + 1 if steps is None else steps))
    if done != want:
        report.why.append(f"steps never done: {sorted(want - done)[:10]}, done beyond: {sorted(done - want)[:10]}")
    report.continuous = not report.why
    return report
