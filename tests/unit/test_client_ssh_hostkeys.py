"""Host key checks of `pai ssh`, its printed commands and web SSH (client/ssh.py): the key the cluster reported is
pinned; without one (a remote OpenPAI) the first key seen is kept per job."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pai_jupyter.client.errors import BadRequest
from pai_jupyter.client.ssh import SshTarget, known_hosts_path, remember_host_key, trusted_host_keys

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ3mZJ0hFVsFd1O3y0m3C2bqZQ9nq3lBqD5o4m0vTq9c"
OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHmxYa+nhSCcNPF9BdtBF27otboA7FHLQbJ4XDnEPD9C"


def _target(tmp_path: Path, **kw: object) -> SshTarget:
    known = known_hosts_path("alice~train", "a profile/x", tmp_path)
    fields: dict = {"host": "127.0.0.1", "port": 2222, "known_hosts": str(known), **kw}
    return SshTarget("alice~train", "main", 0, "RUNNING", user="alice", key="/k", **fields)


def test_a_reported_key_is_pinned_and_a_missing_one_refused(tmp_path: Path) -> None:
    t = _target(tmp_path, host_key=KEY + " comment")
    assert trusted_host_keys(t) == [KEY + " comment"]
    argv = t.ssh_argv("true")
    assert "StrictHostKeyChecking=yes" in argv and f'UserKnownHostsFile="{t.known_hosts}"' in argv
    assert "StrictHostKeyChecking=no" not in " ".join(argv) and "/dev/null" not in " ".join(argv)
    c = t.commands()
    assert "StrictHostKeyChecking=yes" in c["ssh"] and "StrictHostKeyChecking yes" in c["config"]
    with pytest.raises(BadRequest, match="not reported its host key yet"):
        _target(tmp_path).ssh_argv()  # the embedded cluster's sshd is still starting
    assert Path(t.known_hosts or "").parent.name == "a_profile_x"  # one directory per profile


def test_trust_on_first_use_keeps_the_first_key_per_address(tmp_path: Path) -> None:
    t = _target(tmp_path, trust_first=True)
    assert trusted_host_keys(t) == []
    assert "StrictHostKeyChecking=accept-new" in t.ssh_argv()
    remember_host_key(t, KEY + " kept")
    assert trusted_host_keys(t) == [KEY]
    moved = _target(tmp_path, trust_first=True, port=2223)
    assert trusted_host_keys(moved) == []  # another port: not known yet
    assert (Path(t.known_hosts or "").stat().st_mode & 0o077) == 0


@pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="needs ssh-keygen (openssh-client)")
def test_a_file_openssh_hashed_is_read(tmp_path: Path) -> None:
    t = _target(tmp_path, trust_first=True)
    known = Path(t.known_hosts or "")
    known.parent.mkdir(parents=True)
    known.write_text(f"[127.0.0.1]:2222 {KEY}\n[127.0.0.1]:2223 {OTHER}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    assert "127.0.0.1" not in known.read_text()
    assert trusted_host_keys(t) == [KEY]


def test_a_percent_in_the_path_reaches_ssh_as_a_literal(tmp_path: Path) -> None:
    t = _target(tmp_path / "100%", host_key=KEY)
    [opt] = [a for a in t.ssh_argv() if a.startswith("UserKnownHostsFile=")]
    assert "100%%" in opt  # ssh expands %-tokens in this option
