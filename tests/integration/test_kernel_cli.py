"""``pai kernel install|list|remove``: kernelspecs that Jupyter finds and that name the PAI provisioner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("kernelspecs")


def pai(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pai_jupyter.cli", "kernel", *args], capture_output=True, text=True, timeout=120
    )


def _listed(kernelspecs: Path) -> list[str]:
    """The PAI kernelspecs `pai kernel list` shows from this test's Jupyter dir (not a venv's own, `make lab`'s)."""
    listed = json.loads(pai("list", "-o", "json").stdout)
    return [k["name"] for k in listed if k["resourceDir"].startswith(str(kernelspecs))]


def test_install_list_and_remove(tmp_path: Path, kernelspecs: Path) -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    r = pai(
        "install",
        "--gpu",
        "1",
        "--cpu",
        "4",
        "--memory-mb",
        "8192",
        "--image",
        "my/torch:2",
        "--python",
        "/opt/conda/bin/python",
    )
    assert r.returncode == 0, r.stderr
    assert "installed kernelspec pai-1gpu (Python 3 on PAI (1 GPU, 4 CPU, 8192 MB))" in r.stdout
    spec = KernelSpecManager().get_kernel_spec("pai-1gpu")  # what Jupyter (and Lab's launcher) reads
    assert spec.display_name == "Python 3 on PAI (1 GPU, 4 CPU, 8192 MB)"
    assert spec.interrupt_mode == "message" and spec.argv[0] == "/opt/conda/bin/python"
    prov = spec.metadata["kernel_provisioner"]
    assert prov == {
        "provisioner_name": "pai-provisioner",
        "config": {"gpu": 1, "cpu": 4, "memory_mb": 8192, "image": "my/torch:2", "python": "/opt/conda/bin/python"},
    }
    assert pai("install", "--name", "small").returncode == 0
    assert _listed(kernelspecs) == ["pai-1gpu", "small"]
    assert "pai-1gpu" in pai("list").stdout
    r = pai("remove", "pai-1gpu")
    assert r.returncode == 0 and "removed kernelspec pai-1gpu" in r.stdout
    assert _listed(kernelspecs) == ["small"]
    r = pai("install", "--name", "tunnelled", "--tunnel", "always", "--identity", str(tmp_path / "id_ed25519"))
    assert r.returncode == 0, r.stderr
    config = KernelSpecManager().get_kernel_spec("tunnelled").metadata["kernel_provisioner"]["config"]
    assert config["tunnel"] == "always" and config["identity"] == str(tmp_path / "id_ed25519")


def test_bad_input_is_refused_with_exit_2() -> None:
    r = pai("install", "--memory-mb", "10")
    assert r.returncode == 2 and "--memory-mb >= 100" in r.stderr
    r = pai("install", "--name", "Bad Name!")
    assert r.returncode == 2 and "kernel name" in r.stderr
    r = pai("install", "--profile", "nowhere")
    assert r.returncode == 2 and "nowhere" in r.stderr
    r = pai("install", "--tunnel", "always", "--no-ssh-plugin")
    assert r.returncode == 2 and "needs the job's ssh plugin" in r.stderr
    r = pai("remove", "python3")  # not a PAI kernelspec: left alone
    assert r.returncode == 2 and "no PAI kernelspec named 'python3'" in r.stderr
