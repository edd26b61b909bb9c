"""A real daemon for the tests: started on a free loopback port with its own PAI_JUPYTER_HOME, called through
``Api`` (a bare REST caller), cleaned up after (its tasks' processes, cgroups and OS accounts); a one-role v1 job;
skips where Docker or the kernel provisioner is missing. tests/integration/conftest.py makes fixtures of these
(``daemon``, ``shared_daemon``, ``docker_daemon``, ...)."""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
import tempfile
from collections.abc import Collection
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
import pytest

from pai_jupyter.cluster import control
from pai_jupyter.cluster.core.accounts import UidRanges
from pai_jupyter.cluster.core.hostaccounts import HomeAccounts
from pai_jupyter.cluster.paths import local_dir
from pai_jupyter.common import channel
from pai_jupyter.common.states import FINAL
from tests.bench.common import kill_task_leftovers
from tests.polling import wait_for


class Api:
    """A bare REST caller for the daemon tests (the product's client is tested on its own)."""

    def __init__(self, url: str, token: str, home: Path, socket: str | None = None):
        """``socket``: the daemon's unix socket, which the calls go through (as the product's clients' do)."""
        self.url, self.token, self.home, self.socket = url, token, home, socket
        self.http = channel.http_client({"url": url, "token": token, "socket": socket}, timeout=30)

    def as_user(self, token: str) -> Api:
        return Api(self.url, token, self.home, self.socket)

    def new_user(self, name: str, **fields: Any) -> Api:
        """Add user ``name`` (``fields``: admin, password) as this caller (an admin); an Api that calls as them."""
        r = self.http.post("/api/v2/local/users", json={"name": name, **fields})
        assert r.status_code == 201, r.text
        return self.as_user(r.json()["token"])

    def submit(self, text: str, content_type: str | None = None) -> httpx.Response:
        ctype = content_type or ("application/json" if text.lstrip().startswith("{") else "text/yaml")
        return self.http.post("/api/v2/jobs", content=text.encode(), headers={"Content-Type": ctype})

    def submit_ok(self, text: str) -> str:
        r = self.submit(text)
        assert r.status_code == 202, r.text
        return f"{r.json()['username']}~{r.json()['name']}"

    def detail(self, job: str) -> dict[str, Any]:
        r = self.http.get(f"/api/v2/jobs/{job}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait(self, job: str, states: Collection[str] = FINAL, timeout: float = 30) -> dict[str, Any]:
        seen: list[dict[str, Any]] = []

        def reached() -> dict[str, Any] | None:
            seen[:] = [self.detail(job)]
            return seen[-1] if seen[-1]["jobStatus"]["state"] in states else None

        return wait_for(reached, timeout, lambda: f"{job} to reach {sorted(states)}, still: {seen[-1]}")

    def log(
        self,
        job: str,
        role: str = "main",
        index: int = 0,
        name: str = "all",
        attempt: int | None = None,
        task_attempt: int = 0,
        tail: bool = False,
    ) -> str:
        if attempt is None:
            attempt = self.detail(job)["jobStatus"]["attemptId"]
        q = "?tail-mode=true" if tail else ""
        r = self.http.get(
            f"/api/v2/jobs/{job}/attempts/{attempt}/taskRoles/{role}/taskIndex/{index}/attempts/{task_attempt}/logs{q}"
        )
        assert r.status_code == 200, r.text
        uri = {loc["name"]: loc["uri"] for loc in r.json()["locations"]}[name]
        r = self.http.get(uri)
        assert r.status_code == 200, r.text
        return r.text

    def stop(self, job: str) -> httpx.Response:
        return self.http.put(f"/api/v2/jobs/{job}/executionType", json={"value": "STOP"})

    def tasks(self, detail: dict[str, Any], role: str = "main") -> list[dict[str, Any]]:
        return detail["taskRoles"][role]["taskStatuses"]


def kill_leftovers(home: Path) -> None:
    """Kill any task process group a test left behind, remove its cgroup and the OS accounts its daemon made (only
    that daemon's: another test's or program's run beside it may have accounts of the same users)."""
    kill_task_leftovers(home)
    remove_accounts(home)


def remove_accounts(home: Path) -> None:
    """Remove the OS accounts the daemon of ``home`` made (a root daemon's users' ``pai-`` accounts)."""
    if os.geteuid() == 0:
        for pw in home_accounts(home).made():  # userdel refuses while a killed process is still exiting (8)
            with contextlib.suppress(AssertionError):
                wait_for(lambda name=pw.pw_name: _userdel(name) in (0, 6), 10)


def _userdel(name: str) -> int:
    return subprocess.run(["userdel", name], capture_output=True, check=False).returncode


def home_accounts(home: Path) -> HomeAccounts:
    """The OS accounts the daemon of ``home`` makes for its users (cluster/core/hostaccounts.py)."""
    return HomeAccounts(local_dir(home), UidRanges.read().system)


def account_of(home: Path, user: str) -> pwd.struct_passwd:
    """The OS account the daemon of ``home`` made for ``user`` (``pai-<user>``, unless another home has that)."""
    found = home_accounts(home).find(user)
    assert found is not None, f"the daemon of {home} made no OS account for {user}"
    return found


def reachable(home: Path) -> None:
    """A daemon run as root runs other users' tasks as their own OS accounts (cluster/core/accounts.py): those must
    be able to traverse the test's temporary directories to their own, as they would /home or /srv."""
    if os.geteuid() != 0:
        return
    tmp = Path(tempfile.gettempdir()).resolve()
    for p in Path(home).resolve().parents:
        if p != tmp and tmp in p.parents and p.exists() and not p.stat().st_mode & 0o001:
            p.chmod(p.stat().st_mode | 0o001)


def start_daemon(home: Path, **kwargs: Any) -> Api:
    reachable(home)
    kwargs.setdefault("runtime", "process")
    kwargs.setdefault("cpus", 8)
    kwargs.setdefault("memory_mb", 8192)
    kwargs.setdefault("gpus", 0)
    kwargs.setdefault("stop_grace", 0.5)
    info = control.start(home, **kwargs)
    return Api(info["url"], info["token"], home, info.get("socket"))


def provisioner_installed() -> None:
    """The provisioner is found through its entry point: only an installed pai_jupyter (pip install -e .) has it."""
    names = {ep.name for ep in entry_points(group="jupyter_client.kernel_provisioners")}
    if "pai-provisioner" not in names:
        pytest.skip("the pai-provisioner entry point is not installed (pip install -e . in this venv)")


def docker_or_skip() -> None:
    from pai_jupyter.cluster.runtime.docker import docker_available

    if not docker_available():
        if os.environ.get("PAI_TEST_REQUIRE_DOCKER") == "1":
            pytest.fail("PAI_TEST_REQUIRE_DOCKER=1 but no Docker engine answers")
        pytest.skip(
            "no Docker engine answers (start dockerd as .ci/run does; CONTRIBUTING.md lists what the suite needs)"
        )


def v1(name: str, command: str, **role: Any) -> str:
    """A one-role v1 job as JSON text."""
    import json

    r = {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": command}
    r.update(role)
    return json.dumps({"jobName": name, "image": "pai-test/busybox:latest", "taskRoles": [r]})
