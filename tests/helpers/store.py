"""The store tests' helpers: a copy of the state database the code from before schema versions wrote."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from pai_jupyter.cluster.core.store.migrations import version

OLD = Path(__file__).parents[1] / "data" / "state-before-versions.db"


def old_database(folder: Path) -> Path:
    """``folder/state.db``: a fresh copy of the database from before versions (checked to be at version 0)."""
    path = folder / "state.db"
    shutil.copyfile(OLD, path)
    with sqlite3.connect(path) as c:
        assert version(c) == 0  # as the code from before versions wrote it
    return path
