"""A toy trainer that keeps the platform's checkpoint contract through pai_jupyter.checkpoint (docs/checkpoint.md),
for the preemption tests: ``train.py --steps N --every K --step-seconds S`` (or ``train.py N K S``).

Its state is the step reached and the sum of the steps so far; each checkpoint holds both with a SHA-256 of them,
so a torn or mixed checkpoint is found (verify.py). It resumes from the latest checkpoint; each step sleeps S and
writes ``<attempt> <step> <time> <loss>`` to stdout and to ``$PAI_CHECKPOINT_DIR/progress/<attempt>.log``, with
``resume <step>`` first, ``saved <step>`` after each checkpoint and ``preempted <last saved step>`` last when it
was. It checkpoints every K steps, and at once when preempted (then exits 128 + the signal's number: 143 for TERM);
after N steps it prints DONE and exits 0. The attempt is the ``.a<n>.`` of ``$PAI_CONTAINER_ID`` (the task's key,
``user~job.a<attempt>.<role>.<index>.t<n>``; no variable of its own says it)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time

from pai_jupyter import checkpoint


def digest(step: int, total: int) -> str:
    return hashlib.sha256(f"{step} {total}".encode()).hexdigest()


def attempt() -> str:
    """The job attempt, from the end of the task's key (a job's name may hold ``.a1.`` too)."""
    m = re.search(r"\.a(\d+)\.[^.]+\.\d+\.t\d+$", os.environ.get("PAI_CONTAINER_ID", ""))
    return m.group(1) if m else "0"


def main(steps: int, every: int, step_s: float) -> int:
    checkpoint.watch()  # before anything: a preemption may come at once
    found = checkpoint.load(lambda p: json.loads(p.read_bytes()))
    step, total = -1, 0
    if found is not None:
        state = found[1]
        assert isinstance(state, dict) and state["sha256"] == digest(state["step"], state["total"]), state
        step, total = state["step"], state["total"]
    progress = checkpoint.directory() / "progress"
    progress.mkdir(exist_ok=True)
    me = attempt()
    with open(progress / f"{me}.log", "a", buffering=1) as log:

        def say(line: str) -> None:
            log.write(f"{line}\n")
            print(line, flush=True)

        say(f"resume {step}")
        saved = step
        while step + 1 < steps:
            time.sleep(step_s)
            step += 1
            total += step
            say(f"{me} {step} {time.time():.3f} {1 / (step + 1):.6f}")
            if (step + 1) % every == 0 or checkpoint.preempting():
                state = {"step": step, "total": total, "sha256": digest(step, total)}
                checkpoint.save(json.dumps(state).encode(), step)
                saved = step
                say(f"saved {step}")
            if checkpoint.preempting():
                say(f"preempted {saved}")
                return 128 + checkpoint.preempt_signal()
    print("DONE", flush=True)
    return 0


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--every", type=int, default=5, help="steps between checkpoints")
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("positional", nargs="*", help="STEPS EVERY STEP_SECONDS (the older form)")
    args = parser.parse_args(argv)
    for name, value in zip(("steps", "every", "step_seconds"), args.positional[:3], strict=False):
        setattr(args, name, type(getattr(args, name))(value))
    return args


if __name__ == "__main__":
    a = arguments(sys.argv[1:])
    sys.exit(main(a.steps, a.every, a.step_seconds))
