"""The PAI kernel's job and kernelspec, without a cluster: the keys are masked secrets, names are valid, the
connection info needs every port, the lease is declared, bad resources are refused."""

from __future__ import annotations

import pytest
import zmq
from zmq.utils import z85

from pai_jupyter.client.models import JobDetail
from pai_jupyter.kernel import jobspec
from pai_jupyter.kernel.kernelspec import KernelSpecError, spec_json
from pai_jupyter.protocol import Job
from pai_jupyter.protocol.parse import load_document
from pai_jupyter.protocol.render import masked_text, render_commands

KEY = "0123456789abcdef-secret-key"
CURVE = zmq.curve_keypair()  # (public, secret), Z85


def test_the_key_is_a_secret_masked_in_the_config_and_only_in_the_rendered_script() -> None:
    job = jobspec.kernel_job(
        "nb-kernel-abc123",
        KEY,
        jobspec.KernelJobOptions(python="/venv/bin/python", gpu=1),
        curve_secret=CURVE[1],
        kernel_name="pai-1gpu",
        workdir="/home/me/project",
        bind_ip="127.0.0.1",
    )
    text = job.to_yaml()
    parsed = Job.from_text(text)
    curve = z85.decode(CURVE[1]).hex()  # the CurveZMQ secret key, as hex (no quote or `<%` in it)
    assert parsed.secrets == {"kernelKey": KEY, "kernelCurveKey": curve}
    for secret in (KEY, curve):
        assert secret not in masked_text(text, load_document(text))  # what GET .../config returns
        assert secret not in "\n".join(parsed.role("kernel").commands)  # the commands name the secret only
    script = render_commands(parsed, parsed.role("kernel"))
    assert f"export PAI_KERNEL_KEY={KEY}" in script or f"export PAI_KERNEL_KEY='{KEY}'" in script
    assert f"export PAI_KERNEL_CURVE_KEY={curve}" in script or f"export PAI_KERNEL_CURVE_KEY='{curve}'" in script
    assert "com.pai_jupyter.lease" not in parsed.extras  # none asked for
    role = parsed.role("kernel")
    assert [p.label for p in role.ports] == list(jobspec.LABELS) and role.gpu == 1
    assert role.output == jobspec.WORKDIR_PREREQ and "cd /home/me/project" in script
    assert "exec /venv/bin/python -c" in script


def test_a_restarted_kernel_asks_for_its_old_ports() -> None:
    job = jobspec.kernel_job(
        "n",
        KEY,
        jobspec.KernelJobOptions(),
        curve_secret=CURVE[1],
        kernel_name="k",
        workdir=None,
        bind_ip="0.0.0.0",
        ports={"shell": 40001, "hb": 40005},
    )
    ports = {p.label: p.begin_at for p in job.role("kernel").ports}
    assert ports == {"shell": 40001, "iopub": 0, "stdin": 0, "control": 0, "hb": 40005}


def test_an_embedded_clusters_kernel_job_declares_its_lease() -> None:
    from pai_jupyter.kernel.lease import REASON, lease_terms
    from pai_jupyter.protocol.rules import lease_problem

    opts = jobspec.KernelJobOptions()
    job = jobspec.kernel_job(
        "n", KEY, opts, curve_secret=CURVE[1], kernel_name="k", workdir=None, bind_ip="127.0.0.1", lease=lease_terms(90)
    )
    parsed = Job.from_text(job.to_yaml())
    assert parsed.extras["com.pai_jupyter.lease"] == {"seconds": 90, "reason": REASON}
    assert lease_problem({"seconds": 0.5}) and lease_problem({"seconds": 90, "what": 1}) and lease_problem(7)
    with pytest.raises(ValueError, match=r"com\.pai_jupyter\.lease: seconds: 0 must be a number from 1"):
        Job.from_text(job.to_yaml().replace("seconds: 90", "seconds: 0"))


@pytest.mark.parametrize(
    ("notebook", "cwd", "prefix"),
    [
        ("work/My Analysis (v2).ipynb", None, "My_Analysis_v2-kernel-"),
        (None, "/home/me/proj.x", "proj_x-kernel-"),
        (None, None, "notebook-kernel-"),
        ("ünïcode.ipynb", None, "n_code-kernel-"),
    ],
)
def test_job_names_are_valid_v2_names_after_the_notebook(notebook: str | None, cwd: str | None, prefix: str) -> None:
    name = jobspec.job_name(notebook, cwd)
    assert name.startswith(prefix) and len(name) == len(prefix) + 6
    Job(name=name, image="x", task_roles=[{"name": "kernel", "command": "true"}])  # accepted by the model


def detail(ports: dict[str, str], ip: str | None = "10.0.0.5") -> JobDetail:
    return JobDetail.from_api(
        {
            "name": "n",
            "jobStatus": {"username": "u", "state": "RUNNING"},
            "taskRoles": {
                "kernel": {
                    "taskStatuses": [
                        {"taskIndex": 0, "taskState": "RUNNING", "containerIp": ip, "containerPorts": ports}
                    ]
                }
            },
        }
    )


def test_connection_info_needs_every_port_and_the_host() -> None:
    ports = {"shell": "1", "iopub": "2", "stdin": "3", "control": "4", "hb": "5"}
    info = jobspec.connection_info(detail(ports), b"k")
    assert info == {
        "ip": "10.0.0.5",
        "transport": "tcp",
        "signature_scheme": "hmac-sha256",
        "key": b"k",
        "shell_port": 1,
        "iopub_port": 2,
        "stdin_port": 3,
        "control_port": 4,
        "hb_port": 5,
    }
    assert jobspec.connection_info(detail({k: v for k, v in ports.items() if k != "hb"}), b"k") is None
    assert jobspec.connection_info(detail(ports, ip=None), b"k") is None
    curved = jobspec.connection_info(detail(ports), b"k", CURVE)
    assert curved == {**info, "curve_publickey": CURVE[0].decode(), "curve_secretkey": CURVE[1].decode()}


def test_kernelspec_resources_are_checked() -> None:
    spec = spec_json(
        profile="prod", gpu=2, cpu=8, memory_mb=65536, image=None, python=None, virtual_cluster=None, display=None
    )
    assert spec["display_name"] == "Python 3 on PAI prod (2 GPU, 8 CPU, 65536 MB)"
    assert spec["interrupt_mode"] == "message"
    assert spec["metadata"]["supported_encryption"] == ["curve"]  # transport_encryption='required' accepts it
    for bad in ({"gpu": -1}, {"cpu": 0}, {"memory_mb": 99}):
        kw = {"gpu": 0, "cpu": 1, "memory_mb": 1024, **bad}
        with pytest.raises(KernelSpecError):
            spec_json(profile=None, image=None, python=None, virtual_cluster=None, display=None, **kw)


def test_a_tunnelled_kernels_job_has_the_ssh_plugin_with_the_tunnel_key() -> None:
    opts = jobspec.KernelJobOptions()
    job = jobspec.kernel_job(
        "n",
        KEY,
        opts,
        curve_secret=CURVE[1],
        kernel_name="k",
        workdir=None,
        bind_ip="127.0.0.1",
        ssh=jobspec.ssh_parameters("ssh-ed25519 AAAAC3Nz me@laptop"),
    )
    parsed = Job.from_text(job.to_yaml())
    assert parsed.runtime_plugins == [
        {
            "plugin": "ssh",
            "parameters": {"jobssh": False, "userssh": {"type": "custom", "value": "ssh-ed25519 AAAAC3Nz me@laptop"}},
        }
    ]
    assert "PAI_KERNEL_IP=127.0.0.1" in "\n".join(parsed.role("kernel").commands)
    plain = jobspec.kernel_job("n", KEY, opts, curve_secret=CURVE[1], kernel_name="k", workdir=None, bind_ip="0.0.0.0")
    assert Job.from_text(plain.to_yaml()).runtime_plugins == []
    assert jobspec.ssh_parameters(None) == {"jobssh": False}


def test_kernelspec_tunnel_options() -> None:
    base = {
        "profile": None,
        "gpu": 0,
        "cpu": 1,
        "memory_mb": 1024,
        "image": None,
        "python": None,
        "virtual_cluster": None,
        "display": None,
    }
    config = spec_json(**base, tunnel="always", identity="/keys/id")["metadata"]["kernel_provisioner"]["config"]
    assert config["tunnel"] == "always" and config["identity"] == "/keys/id" and "ssh_plugin" not in config
    config = spec_json(**base, ssh_plugin=False)["metadata"]["kernel_provisioner"]["config"]
    assert config["ssh_plugin"] is False and "tunnel" not in config
    with pytest.raises(KernelSpecError, match="tunnel must be one of"):
        spec_json(**base, tunnel="sometimes")
    with pytest.raises(KernelSpecError, match="needs the job's ssh plugin"):
        spec_json(**base, tunnel="always", ssh_plugin=False)
