"""Where a task runs, as its wrapper wrote it on its node (``run/placement``: the task account's file)."""

from __future__ import annotations

from pathlib import Path

from ....common import safeio
from .. import taskdir
from ..base import Where

PLACEMENT = "placement"  # in run/: "node ip [CUDA_VISIBLE_DEVICES]", written by the wrapper as the task's account
MAX_GPU_INDEX = 64  # the most GPUs a node's CUDA_VISIBLE_DEVICES may index


def placement(task_dir: Path) -> Where | None:
    """The node, IP and GPUs the wrapper wrote (a file of the task's account: read without following a link). Only
    GPU indices below MAX_GPU_INDEX count: each is a bit of ``containerGpus``, and 1 << 99999999 is no index."""
    text = safeio.read_text_beneath(task_dir, f"{taskdir.RUN}/{PLACEMENT}", 512)
    parts = (text or "").split()
    if len(parts) < 2:
        return None
    named = parts[2].split(",") if len(parts) > 2 else []
    gpus = [int(g) for g in named if g.isascii() and g.isdigit() and int(g) < MAX_GPU_INDEX]
    return Where(node=parts[0], ip=parts[1], gpus=list(dict.fromkeys(gpus)))
