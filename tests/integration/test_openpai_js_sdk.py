"""OpenPAI's own JS SDK (@microsoft/openpai-js-sdk, installed from npm into tests/js by .ci/run) drives the real
daemon behind a ``/rest-server`` gateway prefix, as on an OpenPAI cluster: login with a password, list, submit,
detail, config, logs (both steps; the log fetched with no header), events, attempts, tags, stop, virtual
clusters, the user and tokens, storages, groups, SKU types and (as the admin) Kubernetes nodes
(tests/js/sdk_check.js)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.daemon import Api
from tests.helpers.prefix_proxy import prefix_proxy

JS = Path(__file__).resolve().parent.parent / "js"


def test_openpai_js_sdk_drives_the_daemon_behind_a_gateway_prefix(daemon: Api) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (CI installs it; the SDK runs on node)")
    assert (JS / "node_modules" / "@microsoft" / "openpai-js-sdk").is_dir(), (
        "the SDK is not installed: run `npm ci` in tests/js (.ci/run does)"
    )
    r = daemon.http.post("/api/v2/local/users", json={"name": "sdkuser", "password": "sdk-pass-1"})
    assert r.status_code == 201, r.text
    with prefix_proxy(daemon.url) as (base, seen):
        run = subprocess.run(
            [node, str(JS / "sdk_check.js")],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=240,
            env={
                **os.environ,
                **{"PAI_URL": base, "PAI_USER": "sdkuser", "PAI_PASSWORD": "sdk-pass-1"},
                **{"PAI_ADMIN": pwd.getpwuid(os.geteuid()).pw_name, "PAI_ADMIN_TOKEN": daemon.token},
            },
        )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["info"]["launcherType"] == "k8s"
    assert out["submit"]["status"] == 202 and "sdk_hello" in out["list"]
    assert out["state"] == "SUCCEEDED" == out["attemptState"]
    assert out["config"]["name"] == "sdk_hello" and out["config"]["protocolVersion"] == 2
    assert out["task"]["taskState"] == "SUCCEEDED" and out["task"]["attempts"][0]["containerExitCode"] == 0
    assert {"stdout", "stderr", "all"} <= set(out["logNames"]) == set(out["portalLogNames"])
    assert out["stdout"].endswith("sdk-hello\n") and "tail-mode=true" in out["tailUri"]
    reasons = [reason for reason, _ in out["events"]]
    assert reasons[0] == "JobSucceeded" and reasons[-1] == "Submitted"
    assert out["attempts"] == [[0, "SUCCEEDED"]] and out["attempt0"] is True and out["healthz"] == "ok"
    assert out["tagged"] == ["sdk-tag"] and out["untagged"] == []
    assert out["stopped"] == "STOPPED"
    assert out["vcs"] == ["default"] and out["vcDefault"]["resourcesTotal"]["cpu"] == 8
    assert out["user"]["username"] == "sdkuser" and out["user"]["admin"] is False
    assert out["user"]["grouplist"] == ["default"]
    # what the embedded cluster has, where OpenPAI's SDK got NoApiError: no PV storages, a group per virtual
    # cluster (and the admins'), one SKU (the machine's share per CPU: it has no GPU), this machine as the node
    assert out["storages"] == out["defaultStorages"] == {"storages": []}
    assert out["noStorage"] == [404, "NoStorageError"]
    assert out["groups"] == ["admingroup", "default"] and out["noGroup"] == [400, "NoGroupError"]
    assert out["group"]["extension"]["acls"] == {"admin": False, "virtualClusters": ["default"], "storageConfigs": []}
    assert out["skus"] == {"cpu": {"cpu": 1, "memory": 1024, "gpu": 0}}  # 8 CPUs, 8192 MB (start_daemon)
    assert out["noVcSkus"] == [404, "NoVirtualClusterError"]
    assert out["nodesAsUser"] == out["membersAsUser"] == [403, "ForbiddenUserError"]
    assert out["nodes"] == [["local", {"cpu": "8", "memory": "8192Mi", "nvidia.com/gpu": "0", "pods": "110"}, "True"]]
    assert ["sdkuser", False] in out["members"] and out["admins"] == [pwd.getpwuid(os.geteuid()).pw_name]
    assert out["tokens"] >= 2  # the user's own (created by the admin) and the SDK's login
    # everything went through the gateway; the login was the password one; the log itself carried no header
    assert ("POST", "/api/v2/authn/basic/login", False) in seen
    assert [auth for method, path, auth in seen if path.startswith("/api/v2/local/logs/")] == [False]
