"""OpenPAI's routes, shapes and codes on the real daemon: login (form-urlencoded, OpenPAI's errors, the limit on
failed logins), the routes official clients call, events and attempts in OpenPAI's shape, log locations that
work with no header (and the client's resolution of them behind a gateway's path prefix), logs sent in chunks
with Range, and submissions parsed off the event loop with an entry-count limit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from pai_jupyter.client import Client
from pai_jupyter.cluster import control
from tests.helpers.daemon import Api, kill_leftovers, start_daemon, v1
from tests.helpers.prefix_proxy import prefix_proxy


def _user(daemon: Api, name: str, password: str = "hunter22", admin: bool = False) -> Api:
    r = daemon.http.post("/api/v2/local/users", json={"name": name, "password": password, "admin": admin})
    assert r.status_code == 201, r.text
    return daemon.as_user(r.json()["token"])


def test_login_takes_form_bodies_and_answers_with_openpais_codes(daemon: Api) -> None:
    _user(daemon, "bob")
    login = daemon.url + "/api/v2/authn/basic/login"
    r = httpx.post(login, data={"username": "bob", "password": "hunter22", "expiration": "3600"})
    assert r.status_code == 200 and r.json()["user"] == "bob" and r.json()["admin"] is False
    assert (
        httpx.get(daemon.url + "/api/v2/jobs", headers={"Authorization": f"Bearer {r.json()['token']}"}).status_code
        == 200
    )
    for body, status, code in (
        ({"username": "nobody", "password": "hunter22"}, 400, "NoUserError"),
        ({"username": "bob", "password": "wrong-pw"}, 400, "IncorrectPasswordError"),
        ({"username": "bob", "password": "short"}, 400, "InvalidParametersError"),
        ({"username": "b ob", "password": "hunter22"}, 400, "InvalidParametersError"),
        ({"username": "bob", "password": "hunter22", "expiration": "5"}, 400, "InvalidParametersError"),
    ):
        r = httpx.post(login, data=body)
        assert (r.status_code, r.json()["code"]) == (status, code), (body, r.text)
    # v1's token route logs in too, and lists tokens with a bearer token
    r = httpx.post(daemon.url + "/api/v1/token", json={"username": "bob", "password": "hunter22"})
    assert r.status_code == 200
    bob = daemon.as_user(r.json()["token"])
    ids = bob.http.get("/api/v1/token").json()["tokens"]
    assert ids == bob.http.get("/api/v2/tokens").json()["tokens"] and all(i.startswith("sha256-") for i in ids)
    assert r.json()["token"] not in json.dumps(ids)  # stored hashed: never listed
    # revoke one by its id: it stops working; someone else's token cannot be revoked (but by an admin)
    assert bob.http.delete(f"/api/v2/tokens/{ids[0]}").status_code == 200
    assert _user(daemon, "eve").http.delete(f"/api/v2/tokens/{r.json()['token']}").status_code == 403
    assert bob.http.delete(f"/api/v2/tokens/{r.json()['token']}").status_code == 200
    assert bob.http.get("/api/v2/jobs").status_code == 401


def test_failed_logins_are_limited_per_user_with_retry_after(daemon: Api) -> None:
    _user(daemon, "carol")
    _user(daemon, "dave")
    login = daemon.url + "/api/v2/authn/basic/login"
    codes = [httpx.post(login, data={"username": "carol", "password": f"guess-{i}"}).json()["code"] for i in range(10)]
    assert codes == ["IncorrectPasswordError"] * 10
    r = httpx.post(login, data={"username": "carol", "password": "hunter22"})  # even the right one, for now
    assert r.status_code == 429 and r.json()["code"] == "TooManyRequestsError"
    assert 0 < int(r.headers["Retry-After"]) <= 300
    assert httpx.post(login, data={"username": "dave", "password": "hunter22"}).status_code == 200  # others can


def test_failed_logins_made_at_once_cannot_slip_under_the_limit(daemon: Api) -> None:
    """20 wrong passwords sent together: 10 are checked (in worker threads), the rest answered 429 at once."""
    from concurrent.futures import ThreadPoolExecutor

    _user(daemon, "erin")
    login = daemon.url + "/api/v2/authn/basic/login"
    with ThreadPoolExecutor(20) as pool:
        codes = list(
            pool.map(
                lambda i: (
                    httpx.post(login, data={"username": "erin", "password": f"guess-{i}"}, timeout=60).status_code
                ),
                range(20),
            )
        )
    assert sorted(codes) == [400] * 10 + [429] * 10
    assert daemon.http.get("/api/v2/jobs").status_code == 200


def test_password_checks_run_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """PBKDF2 costs tens of milliseconds a try: it runs in a worker thread, never on the loop's."""
    import asyncio
    import threading

    from pai_jupyter.cluster.core.store import Store, hash_password
    from pai_jupyter.cluster.http import authn

    threads: list[str] = []

    def recording_check(password: str, stored: str | None) -> bool:
        threads.append(threading.current_thread().name)
        return stored == hash_password(password, bytes.fromhex(stored.split("$")[1])) if stored else False

    monkeypatch.setattr(authn, "check_password", recording_check)

    class OneUser:
        def user(self, name: str) -> dict[str, object]:
            return {"name": name, "admin": 0, "password_hash": hash_password("hunter22")}

        def new_token(self, user: str, label: str) -> str:
            return "t"

    async def run() -> dict[str, object]:
        return await authn.login(OneUser(), authn.LoginLimiter(), {"username": "u", "password": "hunter22"}, "c")  # type: ignore[arg-type]

    assert asyncio.run(run())["user"] == "u"
    assert threads and threads[0] != threading.main_thread().name
    assert Store  # (the real store's check_password is the same function)


def test_routes_official_clients_call(daemon: Api) -> None:
    me = daemon.http.get("/api/v2/info").json()["user"]
    bob = _user(daemon, "bob")
    job = daemon.submit_ok(v1("routes", "echo hi"))
    daemon.wait(job)
    detail = daemon.http.get(f"/api/v2/jobs/{job}/attempts/0").json()
    assert detail["jobStatus"]["state"] == "SUCCEEDED" and detail["taskRoles"]["main"]["taskStatuses"]
    assert daemon.http.get(f"/api/v2/jobs/{job}/attempts/1").json()["code"] == "NoJobError"
    task = daemon.http.get(f"/api/v2/jobs/{job}/attempts/0/taskRoles/main/taskIndex/0/attempts").json()
    assert (task["username"], task["taskRoleName"], task["taskState"]) == (me, "main", "SUCCEEDED")
    assert task["attempts"][0]["containerExitCode"] == 0 and task["attempts"][0]["containerLog"].endswith("/logs")
    attempt = daemon.http.get(f"/api/v2/jobs/{job}/job-attempts/0").json()
    assert attempt["isLatest"] and attempt["uid"] and attempt["totalTaskNumber"] == 1
    assert (attempt["jobStartedTime"] and attempt["exitDiagnostics"] is None) or isinstance(
        attempt["exitDiagnostics"], dict
    )
    assert daemon.http.get(f"/api/v2/jobs/{job}/job-attempts/healthz").text == "ok"
    # tags show in the list item and the detail; deleting a missing one is NoTagError
    assert daemon.http.put(f"/api/v2/jobs/{job}/tag", json={"value": "best"}).status_code == 200
    assert [j["tags"] for j in daemon.http.get("/api/v2/jobs").json() if j["name"] == "routes"] == [["best"]]
    assert daemon.detail(job)["jobStatus"]["tags"] == ["best"] == daemon.detail(job)["tags"]
    assert daemon.http.request("DELETE", f"/api/v2/jobs/{job}/tag", json={"value": "best"}).status_code == 200
    r = daemon.http.request("DELETE", f"/api/v2/jobs/{job}/tag", json={"value": "best"})
    assert (r.status_code, r.json()["code"]) == (404, "NoTagError")
    assert bob.http.put(f"/api/v2/jobs/{job}/tag", json={"value": "x"}).json()["code"] == "NoJobError"
    # users: oneself (v1 and v2 paths), the admin list, nobody else's
    for path in ("/api/v1/user/bob", "/api/v2/users/bob", "/api/v2/user/bob"):
        info = bob.http.get(path).json()
        assert (info["username"], info["admin"], info["virtualCluster"]) == ("bob", False, ["default"]), path
    assert bob.http.get(f"/api/v2/users/{me}").json()["code"] == "ForbiddenUserError"
    assert bob.http.get("/api/v2/users").status_code == 403
    assert {u["username"] for u in daemon.http.get("/api/v2/users").json()} == {me, "bob"}
    assert daemon.http.get("/api/v2/users/nobody").json()["code"] == "NoUserError"
    # virtual clusters
    vcs = bob.http.get("/api/v2/virtual-clusters").json()
    assert vcs["default"]["resourcesTotal"]["vCores"] == 8 == vcs["default"]["resourcesTotal"]["cpu"]
    assert bob.http.get("/api/v2/virtual-clusters/default").json() == vcs["default"]
    assert bob.http.get("/api/v2/virtual-clusters/nope").json()["code"] == "NoVirtualClusterError"
    # OpenPAI's error code for an unknown route
    assert daemon.http.get("/api/v2/nothing-here").json()["code"] == "NoApiError"


def test_events_and_attempts_have_openpais_shape(daemon: Api) -> None:
    job = daemon.submit_ok(v1("shapes", "exit 3"))
    daemon.wait(job)
    events = daemon.http.get(f"/api/v2/jobs/{job}/events").json()["data"]
    iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
    assert all(iso.match(e["firstTimestamp"]) and iso.match(e["lastTimestamp"]) for e in events)
    assert [e["lastTimestamp"] for e in events] == sorted((e["lastTimestamp"] for e in events), reverse=True)
    assert {"uid", "frameworkName", "taskName", "sourceComponent", "sourceHost"} <= set(events[0])
    # OpenPAI's events are all about a pod: its pod and task fields are always set (swagger: not nullable)
    debug = daemon.http.get(f"/api/v2/jobs/{job}").json()["debugId"]
    for e in events:
        assert re.fullmatch(r"[0-9a-f-]{36}", e["podUid"]) and e["taskroleName"] == "main" and e["taskIndex"] == 0
        assert e["taskName"] == f"{debug}-main-0"
    assert "Submitted" in [e["reason"] for e in events]
    attempt = daemon.http.get(f"/api/v2/jobs/{job}/job-attempts").json()[0]
    assert attempt["exitCode"] == 3 and attempt["appExitSpec"]["code"] == 3
    # OpenPAI's runtime reports an exit code it has no pattern for as 255, PAIRuntimeUnknownFailed
    assert attempt["appExitSpec"]["phrase"] == "PAIRuntimeUnknownFailed" and attempt["exitType"] == "Failed"
    assert attempt["appExitSpec"]["reaction"] == "RETRY_TO_MAX"
    assert attempt["exitDiagnostics"]["diagnosticsSummary"] == attempt["appExitDiagnostics"]


def _locations(api: Api, job: str, tail: bool = False) -> dict[str, str]:
    q = "?tail-mode=true" if tail else ""
    r = api.http.get(f"/api/v2/jobs/{job}/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs{q}")
    assert r.status_code == 200, r.text
    return {loc["name"]: loc["uri"] for loc in r.json()["locations"]}


def test_log_locations_work_with_no_header_for_that_task_only(daemon: Api) -> None:
    a = daemon.submit_ok(v1("loga", "echo from-a"))
    b = daemon.submit_ok(v1("logb", "echo from-b"))
    daemon.wait(a)
    daemon.wait(b)
    locs = _locations(daemon, a)
    # the process runtime's notice (the image was not used) is in a runtime log of its own, not in stdout
    assert set(locs) == {"stdout", "stderr", "all", "runtime"} and all("token=" in u for u in locs.values())
    assert httpx.get(daemon.url + locs["stdout"]).text == "from-a\n"  # no Authorization header
    assert "was not used" in httpx.get(daemon.url + locs["runtime"]).text
    token = locs["stdout"].split("token=")[1]
    other = _locations(daemon, b)["stdout"].split("?")[0]
    r = httpx.get(f"{daemon.url}{other}?token={token}")  # a's token does not open b's logs
    assert (r.status_code, r.json()["code"]) == (401, "UnauthorizedUserError")
    assert httpx.get(daemon.url + locs["stdout"].replace("token=", "token=9")).status_code == 401
    assert httpx.get(daemon.url + locs["stdout"].split("?")[0]).status_code == 401  # no token at all
    tail = _locations(daemon, a, tail=True)["all"]
    assert "tail-mode=true" in tail and httpx.get(daemon.url + tail).text == "from-a\n"
    (daemon.home / "local" / "jobs" / a / "a0.main-0.t0" / "runtime").unlink()
    assert "runtime" not in _locations(daemon, a)  # a runtime log is listed only when the runtime wrote one


def test_full_logs_are_sent_in_chunks_and_in_ranges(daemon: Api) -> None:
    job = daemon.submit_ok(v1("biglog", 'i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done'))
    daemon.wait(job)
    uri = daemon.url + _locations(daemon, job)["stdout"]
    whole = httpx.get(uri)
    expected = whole.text
    assert expected == "".join(f"line {i}\n" for i in range(20000))
    assert whole.headers["Accept-Ranges"] == "bytes" and int(whole.headers["Content-Length"]) == len(expected)
    part = httpx.get(uri, headers={"Range": "bytes=3-12"})
    assert (part.status_code, part.text, part.headers["Content-Range"]) == (
        206,
        expected[3:13],
        f"bytes 3-12/{len(expected)}",
    )
    assert httpx.get(uri, headers={"Range": "bytes=-8"}).text == "e 19999\n"
    bad = httpx.get(uri, headers={"Range": f"bytes={len(expected)}-"})
    assert bad.status_code == 416 and bad.headers["Content-Range"] == f"bytes */{len(expected)}"
    assert httpx.get(uri, headers={"Range": "bytes=0-1,5-6"}).status_code == 416


def test_client_reads_logs_behind_a_gateway_path_prefix_without_sending_its_token(daemon: Api) -> None:
    job = daemon.submit_ok(v1("gateway", "echo through-the-gateway"))
    daemon.wait(job)
    with prefix_proxy(daemon.url) as (base, seen), Client(url=base, token=daemon.token) as pai:
        assert pai.logs(job, stream="stdout") == "through-the-gateway\n"
        assert pai.logs(job, stream="stdout", tail=True) == "through-the-gateway\n"
    fetched = [(path, auth) for _, path, auth in seen if path.startswith("/api/v2/local/logs/")]
    assert len(fetched) == 2 and not any(auth for _, auth in fetched), seen  # the location's own token only


def test_a_document_with_100k_keys_is_refused_quickly_by_count(daemon: Api) -> None:
    doc = "jobName: wide\nimage: x\ntaskRoles: []\nextras:\n" + "".join(f"  k{i}: {i}\n" for i in range(100_000))
    r = daemon.submit(doc)
    assert r.status_code == 400 and "more than 10000 entries" in r.json()["message"], r.text[:300]
    assert daemon.http.get("/api/v2/jobs").status_code == 200


def test_client_request_url_resolves_locations_against_the_origin() -> None:
    from pai_jupyter.client.base import request_url
    from pai_jupyter.client.calls import carries_own_token

    base = "https://pai.example.com/rest-server"
    assert request_url(base, "/api/v2/jobs") == base + "/api/v2/jobs"
    assert (
        request_url(base, "/log-manager/10.0.0.1:9103/api/v1/tail?token=x", location=True)
        == "https://pai.example.com/log-manager/10.0.0.1:9103/api/v1/tail?token=x"
    )
    sas = "https://acct.blob.core.windows.net/logs/job-1.stdout?sv=2020&sig=abc"
    assert request_url(base, sas, location=True) == sas
    assert carries_own_token(sas) and carries_own_token("/log-manager/x?token=t&tail-mode=true")
    assert not carries_own_token("/api/v2/local/logs/a~b/0/main/0/0/all")
    # a location on another host never gets the REST token, even without a token of its own
    with Client(url=base, token="rest-secret") as pai:
        from pai_jupyter.client.calls import Req

        _, headers = pai._prepare(Req("GET", "https://logs.example.org/x", location=True))
        assert "Authorization" not in headers
        _, headers = pai._prepare(Req("GET", "/rest-server/api/v2/local/logs/x", location=True))
        assert headers["Authorization"] == "Bearer rest-secret"
    assert Path(__file__).exists()


def test_v1_lengths_and_fixed_ports_are_checked_at_submit(daemon: Api) -> None:
    doc = json.loads(v1("longrole", "true"))
    doc["taskRoles"][0]["name"] = "r" * 300
    r = daemon.submit(json.dumps(doc))
    body = r.json()
    assert r.status_code == 400 and any(p["path"] == "taskRoles[0].name" for p in body["problems"]), r.text
    assert "/" not in body["message"]  # no host path in the answer
    r = daemon.submit(v1("j" * 255, "true"))
    assert r.status_code == 400 and "255" in r.json()["message"], r.text
    # a privileged port: nobody; a fixed port: the admin only, from 1024 up
    ports = [{"label": "ssh", "beginAt": 22, "portNumber": 1}]
    r = daemon.submit(v1("port22", "true", portList=ports))
    assert r.status_code == 400 and "privileged" in r.json()["message"], r.text
    bob = _user(daemon, "bob")
    fixed = [{"label": "web", "beginAt": 20000, "portNumber": 1}]
    r = bob.submit(v1("fixed", "true", portList=fixed))
    assert r.status_code == 400 and "only an admin" in r.json()["message"], r.text
    assert bob.submit(v1("free", "true", portList=[{"label": "web", "beginAt": 0, "portNumber": 2}])).status_code == 202
    job = daemon.submit_ok(v1("fixed", "true", portList=fixed))
    task = daemon.tasks(daemon.wait(job))[0]
    assert int(task["containerPorts"]["web"]) >= 20000


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def test_a_whole_large_log_is_sent_without_loading_it(daemon: Api) -> None:
    """A 190 MiB log once took the daemon from 47 to 422 MB: its peak memory now stays flat (chunks of 64 KiB)."""
    from pai_jupyter.cluster import control

    job = daemon.submit_ok(v1("hugelog", "true"))
    daemon.wait(job)
    log = daemon.home / "local" / "jobs" / job / "a0.main-0.t0" / "stdout"
    size = 128 * 1024 * 1024
    with log.open("wb") as f:
        block = b"x" * 1023 + b"\n"
        for _ in range(size // len(block)):
            f.write(block)
    pid = control.running(daemon.home)["pid"]
    before = _peak_rss_kib(pid)
    received = 0
    with httpx.stream("GET", daemon.url + _locations(daemon, job)["stdout"], timeout=120) as r:
        assert r.status_code == 200 and int(r.headers["Content-Length"]) == size
        for chunk in r.iter_bytes():
            received += len(chunk)
    assert received == size
    assert _peak_rss_kib(pid) - before < 32 * 1024  # KiB: far below the log's 128 MiB


def test_the_list_takes_openpais_tag_and_priority_filters_and_order(daemon: Api) -> None:
    """controllers/v2/job.js: tagsContain / tagsNotContain / jobPriority filter; an order it does not know is
    its default, newest first (the full comparison with OpenPAI's list is tests/unit/test_openpai_rest.py)."""
    names = [daemon.submit_ok(v1(f"lst{i}", "true")).split("~")[1] for i in range(3)]
    me = daemon.http.get("/api/v2/info").json()["user"]
    assert daemon.http.put(f"/api/v2/jobs/{me}~{names[1]}/tag", json={"value": "t1"}).status_code == 200

    def listed(**query: str) -> list[str]:
        r = daemon.http.get("/api/v2/jobs", params=query)
        assert r.status_code == 200, r.text
        return [j["name"] for j in r.json()]

    assert listed(tagsContain="t1") == [names[1]]
    assert listed(tagsNotContain="t1") == [names[2], names[0]]
    assert listed(jobPriority="default") == names[::-1] and listed(jobPriority="prod") == []
    assert listed(order="nope,ASC") == listed(order="submissionTime,asc") == names[::-1]
    assert listed(order="jobName,ASC") == names


def test_an_admin_sets_a_jobs_priority_class_which_the_list_shows_and_filters(daemon: Api) -> None:
    job = daemon.submit_ok(v1("prio", "true"))
    bob = _user(daemon, "bobprio")
    r = daemon.http.put(f"/api/v2/local/jobs/{job}/priority", json={"jobPriority": "prod"})
    assert r.status_code == 200 and r.json()["jobPriority"] == "prod", r.text
    assert [j["name"] for j in daemon.http.get("/api/v2/jobs", params={"jobPriority": "prod"}).json()] == ["prio"]
    assert daemon.http.get(f"/api/v2/jobs/{job}").json()["jobPriority"] == "prod"
    attempts = daemon.http.get(f"/api/v2/jobs/{job}/job-attempts").json()
    assert [a["jobPriority"] for a in attempts] == ["prod"], attempts
    assert daemon.http.get(f"/api/v2/jobs/{job}/job-attempts/0").json()["jobPriority"] == "prod"
    r = daemon.http.put(f"/api/v2/local/jobs/{job}/priority", json={})  # no class given: the one it has stays
    assert r.status_code == 200 and r.json()["jobPriority"] == "prod", r.text
    assert daemon.http.put(f"/api/v2/local/jobs/{job}/priority", json={"jobPriority": "x"}).status_code == 400
    assert bob.http.put(f"/api/v2/local/jobs/{job}/priority", json={"jobPriority": "crit"}).status_code == 403


def test_what_the_cluster_has_answers_at_openpais_paths(tmp_path: Path) -> None:
    """OpenPAI's storage, group, SKU-type and Kubernetes-node routes (NoApiError before): a cluster of 2 GPUs and
    two virtual clusters has a group per virtual cluster, a SKU of a GPU's share of the machine, and one node."""
    home = tmp_path / "pai-home"
    (home / "local").mkdir(parents=True)
    (home / "local" / "cluster.yaml").write_text("virtualClusters:\n  research: {cpu: 2, memoryMB: 2048, gpu: 1}\n")
    admin = start_daemon(home, cpus=8, memory_mb=16384, gpus=2)
    try:
        me = admin.http.get("/api/v2/info").json()["user"]
        bob = _user(admin, "bob")
        assert bob.http.get("/api/v2/users/bob").json()["grouplist"] == ["default", "research"]
        assert admin.http.get(f"/api/v2/users/{me}").json()["grouplist"] == ["admingroup", "default", "research"]
        for path in ("/api/v2/groups", "/api/v2/group"):  # OpenPAI serves both
            assert [g["groupname"] for g in bob.http.get(path).json()] == ["admingroup", "default", "research"]
        research = bob.http.get("/api/v2/group/research").json()
        assert research["extension"]["acls"] == {"admin": False, "virtualClusters": ["research"], "storageConfigs": []}
        assert admin.http.get("/api/v2/groups/admingroup").json()["extension"]["acls"]["admin"] is True
        members = admin.http.get("/api/v2/groups/research/userlist").json()
        assert members == sorted(
            [{"username": "bob", "clusterAdmin": False}, {"username": me, "clusterAdmin": True}],
            key=lambda u: str(u["username"]),
        )
        assert [u["username"] for u in admin.http.get("/api/v2/groups/admingroup/userlist").json()] == [me]
        # one SKU, a GPU's share of the machine, at 2.2.7's path and at the one OpenPAI's JS SDK asks
        sku = {"gpu": {"cpu": 4, "memory": 8192, "gpu": 1}}
        assert bob.http.get("/api/v2/cluster/sku-types").json() == sku
        assert bob.http.get("/api/v2/cluster/sku-types", params={"vc": "research"}).json() == sku
        assert bob.http.get("/api/v2/virtual-clusters/research/sku-types").json() == sku
        r = bob.http.get("/api/v2/cluster/sku-types", params={"vc": "nope"})
        assert (r.status_code, r.json()["code"]) == (404, "NoVirtualClusterError")
        # the node, for admins only (v1 and v2), as a Kubernetes NodeList
        for path in ("/api/v2/kubernetes/nodes", "/api/v1/kubernetes/nodes"):
            assert bob.http.get(path).status_code == 403
            nodes = admin.http.get(path).json()
            assert nodes["kind"] == "NodeList" and [n["metadata"]["name"] for n in nodes["items"]] == ["local"]
            status = nodes["items"][0]["status"]
            assert status["capacity"]["nvidia.com/gpu"] == "2" and status["capacity"]["memory"] == "16384Mi"
            assert {"type": "InternalIP", "address": "127.0.0.1"} in status["addresses"]
        assert bob.http.get("/api/v2/storages", params={"default": "true"}).json() == {"storages": []}
    finally:
        control.stop(home)
        kill_leftovers(home)
