"""Kernelspecs that run their kernel as a PAI job: install, list, remove (``pai kernel ...``).

A spec is an ordinary Jupyter kernelspec (Lab's launcher lists it) whose ``metadata.kernel_provisioner`` names
``pai-provisioner`` with the job's resources; ``interrupt_mode: message`` makes interrupts control-channel
messages, which reach a kernel in any task without a signal; ``supported_encryption: [curve]`` says what every PAI
kernel does (its channels are CurveZMQ), so a server with ``transport_encryption = required`` starts it.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROVISIONER = "pai-provisioner"
NAME_RE = re.compile(r"^[a-z0-9._-]+$")
TUNNEL_MODES = ("auto", "always", "never")  # the provisioner's ``tunnel`` (kernel/tunnel.py)
LOGO = Path(__file__).with_name("logo-svg.svg")  # a kernelspec's logo-svg resource: the launcher card's icon


class KernelSpecError(ValueError):
    pass


@dataclass
class PaiKernelSpec:
    """What one installed PAI kernelspec says."""

    name: str
    display_name: str
    resource_dir: str
    config: dict[str, Any]


def default_name(profile: str | None, gpu: int) -> str:
    return "pai" + (f"-{profile.lower()}" if profile else "") + (f"-{gpu}gpu" if gpu else "")


def display_name(profile: str | None, gpu: int, cpu: int, memory_mb: int) -> str:
    what = f"{gpu} GPU" if gpu else "CPU"
    where = f" {profile}" if profile else ""
    return f"Python 3 on PAI{where} ({what}, {cpu} CPU, {memory_mb} MB)"


def spec_json(
    *,
    profile: str | None,
    gpu: int,
    cpu: int,
    memory_mb: int,
    image: str | None,
    python: str | None,
    virtual_cluster: str | None,
    display: str | None,
    start_timeout: float | None = None,
    tunnel: str | None = None,
    ssh_plugin: bool | None = None,
    identity: str | None = None,
) -> dict[str, Any]:
    """The kernel.json of a PAI kernel (argv names what runs inside the task; the provisioner starts it)."""
    if gpu < 0 or cpu < 1 or memory_mb < 100:
        raise KernelSpecError("resources must be --gpu >= 0, --cpu >= 1 and --memory-mb >= 100")
    if tunnel and tunnel not in TUNNEL_MODES:
        raise KernelSpecError(f"tunnel must be one of {', '.join(TUNNEL_MODES)}, not {tunnel!r}")
    if tunnel == "always" and ssh_plugin is False:
        raise KernelSpecError("tunnel: always needs the job's ssh plugin (drop --no-ssh-plugin)")
    config: dict[str, Any] = {"gpu": gpu, "cpu": cpu, "memory_mb": memory_mb}
    for key, value in (
        ("profile", profile),
        ("image", image),
        ("python", python),
        ("virtual_cluster", virtual_cluster),
        ("start_timeout", start_timeout),
        ("tunnel", tunnel),
        ("identity", str(Path(identity).expanduser().absolute()) if identity else None),
    ):
        if value:
            config[key] = value
    if ssh_plugin is not None:
        config["ssh_plugin"] = ssh_plugin
    return {
        "argv": [python or "python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display or display_name(profile, gpu, cpu, memory_mb),
        "language": "python",
        "interrupt_mode": "message",
        "metadata": {
            "debugger": False,
            "supported_encryption": ["curve"],  # every PAI kernel's channels are CurveZMQ (provisioner.py)
            "kernel_provisioner": {"provisioner_name": PROVISIONER, "config": config},
        },
    }


def install(
    name: str | None = None,
    *,
    profile: str | None = None,
    gpu: int = 0,
    cpu: int = 1,
    memory_mb: int = 4096,
    image: str | None = None,
    python: str | None = None,
    virtual_cluster: str | None = None,
    display: str | None = None,
    start_timeout: float | None = None,
    user: bool = True,
    prefix: str | None = None,
    tunnel: str | None = None,
    ssh_plugin: bool | None = None,
    identity: str | None = None,
) -> PaiKernelSpec:
    """Write a PAI kernelspec (user data dir by default, or under ``prefix``) and return it."""
    from jupyter_client.kernelspec import KernelSpecManager

    if profile:
        from ..client.profiles import ProfileError, get_profile

        try:
            get_profile(profile)
        except ProfileError as exc:
            raise KernelSpecError(str(exc)) from None
    name = name or default_name(profile, gpu)
    if not NAME_RE.match(name):
        raise KernelSpecError(f"kernel name {name!r}: use lower-case letters, digits, '.', '_' and '-'")
    spec = spec_json(
        profile=profile,
        gpu=gpu,
        cpu=cpu,
        memory_mb=memory_mb,
        image=image,
        python=python,
        virtual_cluster=virtual_cluster,
        display=display,
        start_timeout=start_timeout,
        tunnel=tunnel,
        ssh_plugin=ssh_plugin,
        identity=identity,
    )
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "kernel.json").write_text(json.dumps(spec, indent=2), encoding="utf-8")
        shutil.copyfile(LOGO, Path(tmp) / LOGO.name)  # the launcher's icon (a plain letter without one)
        dest = KernelSpecManager().install_kernel_spec(tmp, kernel_name=name, user=user and not prefix, prefix=prefix)
    return PaiKernelSpec(name, spec["display_name"], dest, spec["metadata"]["kernel_provisioner"]["config"])


def list_specs() -> list[PaiKernelSpec]:
    """The installed kernelspecs that use the PAI provisioner."""
    from jupyter_client.kernelspec import KernelSpecManager

    out = []
    for name, entry in sorted(KernelSpecManager().get_all_specs().items()):
        spec = entry.get("spec") or {}
        prov = (spec.get("metadata") or {}).get("kernel_provisioner") or {}
        if prov.get("provisioner_name") == PROVISIONER:
            out.append(
                PaiKernelSpec(
                    name, spec.get("display_name", name), entry.get("resource_dir", ""), prov.get("config") or {}
                )
            )
    return out


def remove(name: str) -> str:
    """Remove a PAI kernelspec (only ours: other kernelspecs are left alone); returns where it was."""
    from jupyter_client.kernelspec import KernelSpecManager

    if name not in {s.name for s in list_specs()}:
        raise KernelSpecError(f"no PAI kernelspec named {name!r} (see: pai kernel list)")
    return KernelSpecManager().remove_kernel_spec(name)
