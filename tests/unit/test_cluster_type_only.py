"""A function of the cluster takes ``Cluster`` in one way (docs/architecture.md, "What Cluster is"): a part it is
made of names what it uses as a ``Protocol`` (test_cluster_layout.py), and every other module names the class only
under ``if TYPE_CHECKING:``. Only the daemon's entry point loads ``core/service.py`` at run time, inside the
function that builds one, so ``--help`` and a module that is handed the cluster never pay for loading it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.imports import PACKAGE, import_edges, module_name, modules, own_imports

SERVICE = "pai_jupyter.cluster.core.service"
BUILDER = PACKAGE / "cluster" / "daemon.py"  # makes the one Cluster (serve), so it may load the module there


def _runs_service(path: Path, source: str | None = None) -> bool | None:
    """None: ``path`` never loads service.py; False: on import; True: only inside a function."""
    return import_edges(path, set(modules()), source).get(SERVICE)


def test_only_the_daemon_loads_the_cluster_module() -> None:
    loading = {
        module_name(p): deferred
        for p in sorted((PACKAGE / "cluster").rglob("*.py"))
        if p != BUILDER and (deferred := _runs_service(p)) is not None
    }
    assert loading == {}, "name Cluster under `if TYPE_CHECKING:` (or as a Protocol in a part it is made of)"
    assert _runs_service(BUILDER) is True, "the daemon builds the cluster inside serve(), not on import"


def test_the_modules_that_take_it_still_name_it() -> None:
    """The rule is not met by dropping the type: the handlers' base and the chores name Cluster for mypy."""
    for rel in ("http/base.py", "http/app.py", "core/taskops.py", "core/gpuidle.py", "tracking/lifecycle.py"):
        assert f"{SERVICE}.Cluster" in own_imports(PACKAGE / "cluster" / rel), rel


def test_the_check_can_fail() -> None:
    probe = PACKAGE / "cluster" / "http" / "probe.py"  # never written: the source is given
    assert _runs_service(probe, "from ..core.service import Cluster\n") is False
    assert _runs_service(probe, "def f():\n    from ..core import service\n") is True
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..core.service import Cluster\n"
    assert _runs_service(probe, typed) is None
