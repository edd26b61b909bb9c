"""The MNIST training of OpenPAI's tutorial made small enough for a CPU in seconds: synthetic 8x8 digits (ten glyphs, shifted
and noised), a softmax classifier trained with plain numpy SGD, loss and accuracy printed and written as
TensorBoard scalars. Same shape as the PyTorch example: data, model, a training loop, evaluation, a saved model.

    python mnist_small.py --steps 60 --logdir runs/mnist --model-dir model
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

GLYPHS = [  # 5x7 digits 0-9, one string per row
    ["01110", "10001", "10011", "10101", "11001", "10001", "01110"],
    ["00100", "01100", "00100", "00100", "00100", "00100", "01110"],
    ["01110", "10001", "00001", "00010", "00100", "01000", "11111"],
    ["11111", "00010", "00100", "00010", "00001", "10001", "01110"],
    ["00010", "00110", "01010", "10010", "11111", "00010", "00010"],
    ["11111", "10000", "11110", "00001", "00001", "10001", "01110"],
    ["00110", "01000", "10000", "11110", "10001", "10001", "01110"],
    ["11111", "00001", "00010", "00100", "01000", "01000", "01000"],
    ["01110", "10001", "10001", "01110", "10001", "10001", "01110"],
    ["01110", "10001", "10001", "01111", "00001", "00010", "01100"],
]


def digits(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n noisy 8x8 images (flattened, 0..1) and their labels."""
    base = np.array([[[c == "1" for c in row] for row in g] for g in GLYPHS], dtype=np.float32)
    labels = rng.integers(0, 10, n)
    images = np.zeros((n, 8, 8), dtype=np.float32)
    for i, label in enumerate(labels):
        dy, dx = rng.integers(0, 2), rng.integers(0, 4)
        images[i, dy:dy + 7, dx:dx + 5] = base[label]
    images += rng.normal(0, 0.35, images.shape).astype(np.float32)
    return np.clip(images, 0, 1).reshape(n, 64), labels


class Scalars:
    """TensorBoard scalars with tensorboard's own writer when it is installed; otherwise only printed."""

    def __init__(self, logdir: str | None):
        self.writer = None
        if not logdir:
            return
        try:
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.compat.proto.summary_pb2 import Summary
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            print("tensorboard is not installed here: scalars are only printed")
            return
        Path(logdir).mkdir(parents=True, exist_ok=True)
        self.writer = EventFileWriter(logdir)
        self.Event, self.Summary = Event, Summary

    def add(self, tag: str, value: float, step: int) -> None:
        if self.writer is not None:
            v = self.Summary.Value(tag=tag, simple_value=float(value))
            self.writer.add_event(self.Event(step=step, wall_time=time.time(), summary=self.Summary(value=[v])))
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--logdir", default=os.environ.get("PAI_OUTPUT_LOGS"))
    p.add_argument("--model-dir", default=os.environ.get("PAI_OUTPUT_MODEL"))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    test_x, test_y = digits(500, rng)
    w, b = np.zeros((64, 10), dtype=np.float32), np.zeros(10, dtype=np.float32)
    scalars = Scalars(args.logdir)
    for step in range(1, args.steps + 1):
        x, y = digits(args.batch, rng)
        logits = x @ w + b
        logits -= logits.max(axis=1, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(axis=1, keepdims=True)
        loss = float(-np.log(prob[np.arange(len(y)), y] + 1e-9).mean())
        grad = prob
        grad[np.arange(len(y)), y] -= 1
        grad /= len(y)
        w -= args.lr * x.T @ grad
        b -= args.lr * grad.sum(axis=0)
        scalars.add("train/loss", loss, step)
        if step % 10 == 0 or step == args.steps:
            accuracy = float(((test_x @ w + b).argmax(axis=1) == test_y).mean())
            scalars.add("test/accuracy", accuracy, step)
            print(f"step {step} loss={loss:.4f} accuracy={accuracy:.3f}", flush=True)
    scalars.close()
    if args.model_dir:
        Path(args.model_dir).mkdir(parents=True, exist_ok=True)
        np.savez(Path(args.model_dir) / "model.npz", w=w, b=b)
        (Path(args.model_dir) / "metrics.json").write_text(json.dumps({"accuracy": accuracy, "steps": args.steps}))
        print("model saved to", args.model_dir)


if __name__ == "__main__":
    main()
