"""A toy trainer that keeps the platform's checkpoint contract (pai_jupyter.checkpoint, docs/checkpoint.md), for
the preemption tests: ``train.py STEPS EVERY STEP_SECONDS``.

Its state is the step reached and the sum of the steps so far; each checkpoint holds both with a SHA-256 of them,
so a torn or mixed checkpoint is found (verify.py). Each step it appends ``<step> <loss>`` to
``$PAI_CHECKPOINT_DIR/progress/<attempt>.log`` (and ``saved <step>`` after each checkpoint); it checkpoints every
EVERY steps and at once when preempted (then exits 143), resumes from the latest checkpoint, and prints DONE after
STEPS steps."""

from __future__ import annotations

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
    """The job attempt, from the task's key (``user~job.a<attempt>.role.index.t<n>``)."""
    m = re.search(r"\.a(\d+)\.", os.environ.get("PAI_CONTAINER_ID", ""))
    return m.group(1) if m else "0"


def main(steps: int, every: int, step_s: float) -> int:
    checkpoint.watch()  # (before anything: a preemption may come at once)
    found = checkpoint.load(lambda p: json.loads(p.read_bytes()))
    step, total = -1, 0
    if found is not None:
        state = found[1]
        assert isinstance(state, dict) and state["sha256"] == digest(state["step"], state["total"]), state
        step, total = state["step"], state["total"]
    progress = checkpoint.directory() / "progress"
    progress.mkdir(exist_ok=True)
    with open(progress / f"{attempt()}.log", "a", buffering=1) as log:
        log.write(f"resume {step}\n")
        saved = step
        while step + 1 < steps:
            time.sleep(step_s)
            step += 1
            total += step
            log.write(f"{step} {1 / (step + 1):.6f}\n")
            if (step + 1) % every == 0 or checkpoint.preempting():
                state = {"step": step, "total": total, "sha256": digest(step, total)}
                checkpoint.save(json.dumps(state).encode(), step)
                saved = step
                log.write(f"saved {step}\n")
            if checkpoint.preempting():
                log.write(f"preempted {saved}\n")
                return 143
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
