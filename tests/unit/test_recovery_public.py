"""Recovery after a restart drives Cluster through its public methods only (no ``cluster._x``), so Cluster's
internals can change without breaking start-up after a crash (behaviour: tests/integration/test_daemon_recovery.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from pai_jupyter.cluster.core import recovery
from pai_jupyter.cluster.core.service import Cluster


def test_recovery_uses_only_public_members_of_cluster() -> None:
    tree = ast.parse(Path(recovery.__file__).read_text())
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cluster"
    }
    assert used and not {name for name in used if name.startswith("_")}
    assert {"watch", "resume_stop", "resume_completion", "schedule"} <= used
    for name in ("watch", "resume_stop", "resume_completion", "schedule"):
        assert callable(getattr(Cluster, name)), name
