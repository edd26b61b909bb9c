"""What the toy trainers (train.py, train.sh) left in a job's checkpoint directory, checked from the host: every
checkpoint complete and self-consistent, and the steps of all attempts together one unbroken curve.

``verify(dir, steps)`` reads each ``ckpt-*`` (the JSON of train.py or the ``step= total= sum=`` line of train.sh),
the ``latest`` pointer and the progress logs (``progress/<attempt>.log``: ``resume <step>``, one ``<step> <loss>``
per step done, ``saved <step>`` after each checkpoint, ``preempted <last saved step>``). ``lost``: for each resume,
how many steps done before it were done again (work lost to that preemption)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Report:
    checkpoints: int = 0
    corrupt: list[str] = field(default_factory=list)
    attempts: dict[int, tuple[int, int]] = field(default_factory=dict)  # attempt -> (resumed from, last step done)
    lost: list[int] = field(default_factory=list)  # per resume: steps done before that were done again
    continuous: bool = False  # each attempt resumed from a step an earlier one did, and every step was done
    last_step: int = -1


def _sha256(text: str) -> str:
    """What ``echo TEXT | sha256sum`` prints (train.sh's sum)."""
    return hashlib.sha256(f"{text}\n".encode()).hexdigest()


def check(path: Path) -> int | None:
    """The step a checkpoint holds, or None when it is not whole and consistent."""
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
    ok = _sha256(m.group(1).decode()) == m.group(4).decode() and total == step * (step + 1) // 2
    return step if ok else None


def verify(where: Path, steps: int | None = None) -> Report:
    """``steps``: how many the trainer was to do (None: it was stopped; every step up to the last one done)."""
    report = Report()
    for p in sorted(where.glob("ckpt-*")):
        report.checkpoints += 1
        if check(p) is None or int(p.name[5:]) != check(p):
            report.corrupt.append(p.name)
    pointer = where / "latest"
    if pointer.exists() and not (where / pointer.read_text().strip()).is_file():
        report.corrupt.append("latest -> a missing checkpoint")
    done: set[int] = set()
    saved: set[int] = {-1}  # steps some attempt saved (or reported saved when preempted), -1: the start
    ok = True
    logs = sorted((int(p.stem), p) for p in (where / "progress").glob("*.log"))
    for attempt, log in logs:
        resumed, last = None, None
        for line in log.read_text().splitlines():
            word, *rest = line.split()
            if word == "resume":
                resumed = int(rest[0])
                # from a step an earlier attempt did (its "saved" line may be lost to a SIGKILL right after the
                # checkpoint was renamed into place; the trainer checks what it loads)
                ok = ok and (resumed in saved or resumed in done)
                report.lost.append(max(done, default=-1) - resumed)
            elif word == "saved":
                saved.add(int(rest[0]))
            elif word == "preempted":
                pass
            else:
                last = int(word)
                done.add(last)
        report.attempts[attempt] = (resumed if resumed is not None else -2, last if last is not None else -1)
    report.last_step = max(done, default=-1)
    report.continuous = ok and done == set(range(report.last_step + 1 if steps is None else steps))
    return report
