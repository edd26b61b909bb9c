"""One token guard for every TensorBoard pai_jupyter starts (common/tensorboard_guard.py): a task's own runs its
source with ``python3 -c`` (the task may have no pai_jupyter), the Jupyter server's for an ended task runs the
module. Both sides use that one text, and the text stands alone: standard library only, any Python 3."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from pai_jupyter.cluster.task import services
from pai_jupyter.common import tensorboard_guard
from pai_jupyter.server import ended_tensorboard


def test_both_sides_run_the_one_module() -> None:
    text = Path(tensorboard_guard.__file__).read_text(encoding="utf-8")
    assert text == services.TENSORBOARD_GUARD  # the task's: this very source
    assert tensorboard_guard.__name__ == ended_tensorboard.GUARD_MODULE  # the server's: this very module
    script = services.supervisor({"tensorboard": {"port": 6006, "token": "t", "parameters": {}, "basePath": "/x/"}})
    assert "python3 -c" in script and "PAI_SERVICE_TOKEN_TENSORBOARD" in script


def test_the_source_stands_alone_on_any_python3() -> None:
    """Only standard-library imports, no ``from __future__`` (a Python 3.6 image's TensorBoard), and it runs with
    pai_jupyter out of reach: without TensorBoard it fails at the import, never serving unguarded."""
    tree = ast.parse(tensorboard_guard.source())
    top = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    top |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert top <= set(sys.stdlib_module_names) | {"tensorboard"}, top
    assert "__future__" not in top
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", tensorboard_guard.source(), "--logdir", "/nonexistent"],  # no site-packages
        capture_output=True,
        text=True,
        env={"PAI_SERVICE_TOKEN_TENSORBOARD": "t", "PATH": "/usr/bin:/bin"},
        cwd="/",
        timeout=60,
    )
    assert done.returncode != 0 and "No module named 'tensorboard'" in done.stderr, done.stderr[-500:]
