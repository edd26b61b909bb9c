"""A Hub user's server as a job (pai_jupyter/hub/serverjob.py), and how the code in that server finds the cluster
(the ``hub`` profile, client/profiles.py); the daemon's Hub link config (cluster/core/hub.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from pai_jupyter.client.profiles import HUB, Profile, get_profile, load_profiles, save_profiles, upsert_profile
from pai_jupyter.cluster.core.hub import HubConfig
from pai_jupyter.hub.serverjob import EXTRAS_KEY, INTERACTIVE_KEY, ServerOptions, env_script, job_name, server_job
from pai_jupyter.protocol import Job, load_document
from pai_jupyter.protocol.render import masked_text, render_secrets

TOKEN = "0123456789abcdef-the-servers-hub-token"
ENV = {
    "JUPYTERHUB_API_TOKEN": TOKEN,
    "JUPYTERHUB_OAUTH_SCOPES": '["access:servers!server=alice/", "access:servers!user=alice"]',
    "ODD": "it's $HOME `date` \\ and\na newline",
    "not a name": "dropped",
}


def job() -> Job:
    opts = ServerOptions(cpu=2, memory_mb=2048, max_run_minutes=30)
    return server_job(job_name("lab-2"), opts, ENV, user="alice", server_name="lab-2", python="/opt/tools/bin/python3")


def test_the_hubs_environment_reaches_the_tasks_shell_exactly() -> None:
    exported = subprocess.run(
        ["bash", "-c", 'eval "$(printf %s "$1" | base64 -d)"; env -0', "-", env_script(ENV)],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    seen = dict(item.split("=", 1) for item in exported.split("\0") if "=" in item)
    assert {k: seen[k] for k in ENV if k != "not a name"} == {k: v for k, v in ENV.items() if k != "not a name"}
    assert "not a name" not in seen


def test_the_token_travels_as_a_secret_the_config_masks() -> None:
    j = job()
    text = j.to_yaml()
    assert TOKEN not in "\n".join(c for r in j.task_roles for c in r.commands)
    served = masked_text(text, load_document(text))
    assert TOKEN not in served and env_script(ENV) not in served
    script = render_secrets("\n".join(j.task_roles[0].commands), j.secrets)
    assert env_script(ENV) in script  # only the task's shell gets it, in memory


def test_the_job_runs_the_single_user_server_on_its_own_address_and_port() -> None:
    j = job()
    assert j.name.startswith("jupyterhub-lab-2-") and j.name != job().name
    role = j.task_roles[0]
    assert (role.name, role.cpu, role.memory_mb, [p.label for p in role.ports]) == ("server", 2, 2048, ["http"])
    script = "\n".join(role.commands)
    assert 'ip="$PAI_CONTAINER_HOST_IP"' in script and 'port="$PAI_PORT_LIST_server_0_http"' in script
    assert "PAI_HUB_PYTHON=/opt/tools/bin/python3" in script and "-m jupyterhub.singleuser" in script
    assert j.extras[INTERACTIVE_KEY] is True and j.extras["maxRunTimeMinutes"] == 30
    assert j.extras[EXTRAS_KEY] == {"user": "alice", "server": "lab-2"}


def test_a_hub_servers_code_uses_the_hub_profile_never_written_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "pai-home"
    assert HUB not in {p.name for p in load_profiles(home)}
    monkeypatch.setenv("PAI_HUB_CLUSTER_URL", "http://10.0.0.1:8080")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", TOKEN)
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    monkeypatch.setenv("PAI_PROFILE", HUB)
    found = get_profile(None, home)
    assert (found.name, found.url, found.username, found.resolved_token()) == (
        HUB,
        "http://10.0.0.1:8080",
        "alice",
        TOKEN,
    )
    assert found.public()["token"] == "set" and TOKEN not in repr(found)
    upsert_profile(Profile(name="other", url="http://x.test", token="t"), home)
    save_profiles(load_profiles(home), home)
    written = (home / "clusters.yaml").read_text()
    assert TOKEN not in written and HUB not in [c["name"] for c in yaml.safe_load(written)["clusters"]]


def test_the_hub_links_config_says_what_is_wrong() -> None:
    ok = HubConfig.parse({"apiUrl": "http://127.0.0.1:8081/hub/api/", "tokenFile": "/x"}, "hub.yaml")
    assert (ok.api_url, ok.service, ok.accounts) == ("http://127.0.0.1:8081/hub/api", "pai", "dedicated")
    assert ok.access_scopes == {"access:services!service=pai", "access:services"}
    for bad, words in [
        ({"tokenFile": "/x"}, "apiUrl"),
        ({"apiUrl": "http://h/hub/api"}, "tokenFile"),
        ({"apiUrl": "http://h/hub/api", "tokenFile": "/x", "accounts": "root"}, "accounts"),
        ({"apiUrl": "http://h/hub/api", "tokenFile": "/x", "reconcileSeconds": 0}, "reconcileSeconds"),
        ([], "mapping"),
    ]:
        with pytest.raises(ValueError, match=words):
            HubConfig.parse(bad, "hub.yaml")


def run_server_commands(
    tmp_path: Path, server_exit: int, import_exit: int
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The job's commands under bash errexit (as the shim runs them), with a stand-in Python that records how it
    was called: ``-m`` (the server) exits ``server_exit``, ``-c`` (an import) ``import_exit``."""
    log = tmp_path / "calls"
    python = tmp_path / "python3"
    python.write_text(
        f'#!/bin/sh\necho "$1 $2" >> {log}\ncase "$1" in -m) exit {server_exit};; -c) exit {import_exit};; esac\n'
    )
    python.chmod(0o755)
    script = "\n".join(job().task_roles[0].commands).replace("<% $secrets.hubEnv %>", env_script({}))
    script = script.replace("/opt/tools/bin/python3", str(python))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PAI_CONTAINER_HOST_IP": "127.0.0.1"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        env={**env, "PAI_PORT_LIST_server_0_http": "1"},
    )
    return done, log.read_text().splitlines() if log.exists() else []


def test_the_server_starts_without_a_probe_first_and_a_python_that_cannot_run_it_says_so(tmp_path: Path) -> None:
    done, calls = run_server_commands(tmp_path, 0, 0)
    assert done.returncode == 0 and calls == ["-m jupyterhub.singleuser"], calls  # one Python start, not two
    done, calls = run_server_commands(tmp_path, 1, 1)
    assert done.returncode == 127 and "cannot run jupyterhub-singleuser" in done.stderr, done.stderr
    (tmp_path / "calls").unlink()
    done, calls = run_server_commands(tmp_path, 3, 0)  # the server failed on its own: its status, no notice
    assert done.returncode == 3 and "cannot run" not in done.stderr and calls[-1].startswith("-c")
