"""The layering of docs/layout.md, pinned: which of pai_jupyter's packages each one may import. A new import
across layers fails here with the file that made it, so a contract does not grow a second home by accident."""

from __future__ import annotations

import pytest

from tests.helpers.imports import PACKAGE, layer_imports, layer_of, own_imports

# what everyone may use: common/ imports nothing of ours; `__init__` is the package's own names
HELPERS = {"common", "__init__"}
ALLOWED: dict[str, set[str]] = {
    "common": set(),
    "protocol": {"common"},  # the services catalogue names the runtime plugins
    "image": {"sdk"},  # the catalogue's older public name (docs/python.md), a re-export of sdk/images.py
    "__init__": {"notebook", "common"},  # `%load_ext pai_jupyter` finds the magics there (lazily); the version
    "client": {"protocol"} | HELPERS,
    "cluster": {"protocol"} | HELPERS,
    # the surfaces: through the one client, never the daemon or each other's internals
    "server": {"client", "protocol"} | HELPERS,
    "kernel": {"client", "protocol"} | HELPERS,
    "notebook": {"client", "protocol", "sweep"} | HELPERS,
    "sdk": {"client", "protocol"} | HELPERS,
    # sweeps drive jobs through the client; `%%pai_sweep` (notebook) registers them (docs/sweeps.md)
    "sweep": {"client", "protocol"} | HELPERS,
    # JupyterHub's spawner: a surface of its own, through the client (docs/hub.md)
    "hub": {"client", "protocol"} | HELPERS,
    # the command line and `make demo` run the embedded cluster itself (test_client_starter names the files)
    "cli": {"client", "protocol", "cluster", "kernel", "notebook", "hub"} | HELPERS,
    "demo": {"client", "protocol", "cluster", "notebook"} | HELPERS,
    # what a task imports to keep the checkpoint contract (docs/checkpoint.md): a task's Python may have nothing else
    "checkpoint": set(),
}


def _layers() -> list[str]:
    return sorted({p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in PACKAGE.rglob("*.py")})


def test_every_layer_has_a_rule() -> None:
    assert set(_layers()) - {"__main__"} <= set(ALLOWED), "add the new package to ALLOWED (and docs/layout.md)"


@pytest.mark.parametrize("layer", _layers())
def test_a_layer_imports_only_what_it_may(layer: str) -> None:
    allowed = ALLOWED.get(layer, set())
    bad = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0].removesuffix(".py") != layer:
            continue
        if extra := layer_imports(path) - allowed:
            bad[rel.as_posix()] = [name for name in own_imports(path) if layer_of(name) in extra]
    assert bad == {}


def test_the_check_can_fail() -> None:
    """A server module importing the daemon or the notebook is caught, relative or absolute."""
    probe = PACKAGE / "server" / "probe.py"  # never written: the source is given
    source = "from ..cluster.core import store\nimport pai_jupyter.notebook.display\nfrom . import common\n"
    assert layer_imports(probe, source) - ALLOWED["server"] == {"cluster", "notebook"}
    assert {"pai_jupyter.cluster.core.store", "pai_jupyter.server.common"} <= set(own_imports(probe, source))
