"""A tiny trial for notebooks/sweep.ipynb and the sweep tests: a quadratic bowl in (x, log10 lr), minimum at
x = 0.3, lr = 0.01, "trained" in ``steps`` steps whose loss falls toward it; reported with pai_jupyter.report."""

import argparse
import math
import time

import pai_jupyter

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, required=True)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--sleep", type=float, default=0.0)
args = parser.parse_args()

final = (args.x - 0.3) ** 2 + (math.log10(args.lr) + 2) ** 2 / 4
for step in range(args.steps):
    time.sleep(args.sleep)
    pai_jupyter.report(loss=final * (1 + 1 / (step + 1)) if step < args.steps - 1 else final, step=step)
print(f"x={args.x} lr={args.lr} loss={final:.5f}")
