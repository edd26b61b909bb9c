"""The REST surface: auth, user isolation, bad input, listing, config, logs (two-step, tail, live stream)."""

from __future__ import annotations

import json
import sqlite3
import threading

import httpx
import pytest

from tests.helpers.daemon import Api, v1


def test_every_route_needs_a_valid_token(daemon: Api) -> None:
    name = daemon.submit_ok(v1("private", "true"))
    routes = [
        ("GET", "/api/v2/jobs"),
        ("POST", "/api/v2/jobs"),
        ("GET", f"/api/v2/jobs/{name}"),
        ("PUT", f"/api/v2/jobs/{name}/executionType"),
        ("GET", f"/api/v2/jobs/{name}/config"),
        ("GET", f"/api/v2/jobs/{name}/job-attempts"),
        ("GET", f"/api/v2/jobs/{name}/events"),
        ("GET", f"/api/v2/jobs/{name}/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs"),
        ("GET", f"/api/v2/local/logs/{name}/0/main/0/0/all"),
        ("GET", f"/api/v2/local/jobs/{name}/logs/stream"),
        ("GET", "/api/v2/tokens"),
        ("GET", "/api/v2/users"),
        ("GET", "/api/v2/virtual-clusters"),
        ("GET", "/api/v2/virtual-clusters/default/sku-types"),
        ("GET", "/api/v2/cluster/sku-types"),
        ("GET", "/api/v2/storages"),
        ("GET", "/api/v2/storages/x"),
        ("GET", "/api/v2/groups"),
        ("GET", "/api/v2/group/default"),
        ("GET", "/api/v2/groups/default/userlist"),
        ("GET", "/api/v2/kubernetes/nodes"),
        ("GET", "/api/v1/kubernetes/nodes"),
        ("GET", f"/api/v2/jobs/{name}/attempts/0"),
        ("PUT", f"/api/v2/jobs/{name}/tag"),
        ("GET", f"/api/v2/jobs/{name}/attempts/0/taskRoles/main/taskIndex/0/attempts"),
        ("GET", f"/api/v2/jobs/{name}/job-attempts/0"),
        ("GET", "/api/v1/user/x"),
        ("GET", "/api/v1/token"),
        ("POST", "/api/v2/local/users"),
        ("DELETE", "/api/v2/local/users/x"),
        ("DELETE", f"/api/v2/jobs/{name}"),
        ("GET", "/api/v2/nope"),
    ]
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        for method, path in routes:
            r = httpx.request(method, daemon.url + path, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.status_code)
            assert r.json()["code"] == "UnauthorizedUserError"
    # public, as on OpenPAI: info (a wrong token is still refused there), the API indexes and login
    assert httpx.get(daemon.url + "/api/v2/info").json()["launcherType"] == "k8s"
    assert httpx.get(daemon.url + "/api/v2/info", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.get(daemon.url + "/api/v1").json()["name"] == "PAI RESTful API"


def test_users_see_and_control_only_their_own_jobs(daemon: Api) -> None:
    r = daemon.http.post("/api/v2/local/users", json={"name": "bob", "password": "hunter22"})
    assert r.status_code == 201
    bob = daemon.as_user(r.json()["token"])
    mine = daemon.submit_ok(v1("mine", "sleep 5"))
    bobs = bob.submit_ok(v1("mine", "true"))  # same name, other user: fine
    assert bobs == "bob~mine"
    for route in ("/api/v2/jobs", "/api/v2/local/jobs"):  # the sidebar's list with tasks, too
        assert [j["name"] for j in bob.http.get(route).json()] == ["mine"], route
        assert bob.http.get(route, params={"username": mine.split("~")[0]}).json() == [], route
    for method, path in (
        ("GET", f"/api/v2/jobs/{mine}"),
        ("GET", f"/api/v2/jobs/{mine}/config"),
        ("PUT", f"/api/v2/jobs/{mine}/executionType"),
        ("DELETE", f"/api/v2/jobs/{mine}"),
        ("GET", f"/api/v2/jobs/{mine}/attempts/0/taskRoles/main/taskIndex/0/attempts/0/logs"),
        ("GET", f"/api/v2/local/logs/{mine}/0/main/0/0/all"),
    ):
        r = bob.http.request(method, path, json={"value": "STOP"} if method == "PUT" else None)
        assert r.status_code == 404 and r.json()["code"] in ("NoJobError", "NotFoundError"), (path, r.text)
    assert daemon.detail(mine)["jobStatus"]["state"] in ("WAITING", "RUNNING")
    # several jobs' reports in one request (the Sweeps page): another user's job is left out, as if missing
    assert daemon.http.post(f"/api/v2/local/jobs/{mine}/reports", json={"metrics": {"loss": 1.5}}).status_code < 300
    r = bob.http.get("/api/v2/local/reports", params=[("job", mine), ("job", bobs)])
    assert r.status_code == 200 and list(r.json()["reports"]) == [bobs], r.text
    r = daemon.http.get("/api/v2/local/reports", params=[("job", mine)])
    assert [x["metrics"] for x in r.json()["reports"][mine]] == [{"loss": 1.5}], r.text
    # the admin sees everyone's jobs
    assert {j["username"] for j in daemon.http.get("/api/v2/jobs").json()} == {"bob", mine.split("~")[0]}
    assert bob.http.post("/api/v2/local/users", json={"name": "eve"}).status_code == 403
    # login with the password gives a working token; a wrong password does not
    r = httpx.post(daemon.url + "/api/v2/authn/basic/login", json={"username": "bob", "password": "hunter22"})
    assert r.status_code == 200 and r.json()["user"] == "bob"
    assert daemon.as_user(r.json()["token"]).http.get("/api/v2/jobs").status_code == 200
    r = httpx.post(daemon.url + "/api/v2/authn/basic/login", json={"username": "bob", "password": "nope00"})
    assert r.status_code == 400 and r.json()["code"] == "IncorrectPasswordError"
    daemon.stop(mine)


def test_an_admin_revokes_any_token_a_user_only_their_own(daemon: Api) -> None:
    """The audit: an admin could not revoke a leaked token of another user (403)."""
    r = daemon.http.post("/api/v2/local/users", json={"name": "leaky"})
    leaked = r.json()["token"]
    leaky = daemon.as_user(leaked)
    spare = daemon.as_user(daemon.http.post("/api/v2/local/users", json={"name": "leaky"}).json()["token"])
    mallory = daemon.new_user("mallory")
    assert mallory.http.delete(f"/api/v2/tokens/{leaked}").status_code == 403  # not theirs
    assert mallory.http.delete(f"/api/v2/tokens/{daemon.token}").status_code == 403
    assert leaky.http.get("/api/v2/jobs").status_code == 200
    r = daemon.http.delete(f"/api/v2/tokens/{leaked}")  # by the token itself
    assert r.status_code == 200, r.text
    assert leaky.http.get("/api/v2/jobs").status_code == 401
    ids = spare.http.get("/api/v2/tokens").json()["tokens"]
    assert len(ids) == 1
    assert daemon.http.delete(f"/api/v1/token/{ids[0]}").status_code == 200  # by its id, on the v1 path
    assert spare.http.get("/api/v2/jobs").status_code == 401
    assert daemon.http.delete(f"/api/v2/tokens/{ids[0]}").status_code == 403  # gone: names no token
    assert mallory.http.get("/api/v2/jobs").status_code == 200


def test_ssh_keys_are_bounded_in_size_and_count(daemon: Api) -> None:
    """The audit: a 5 MB "key" was stored, and every listing and every task with the ssh plugin carried it."""
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ3mZJ0hFVsFd1O3y0m3C2bqZQ9nq3lBqD5o4m0vTq9c"
    r = daemon.http.post("/api/v2/local/ssh-keys", json={"title": "huge", "value": "ssh-rsa " + "A" * 5_000_000})
    assert r.status_code == 400 and "at most 8192 characters" in r.json()["message"], r.text[:300]
    assert daemon.http.get("/api/v2/local/ssh-keys").json() == []
    for i in range(50):
        r = daemon.http.post("/api/v2/local/ssh-keys", json={"title": f"k{i}", "value": f"{key} k{i}"})
        assert r.status_code == 201, r.text
    r = daemon.http.post("/api/v2/local/ssh-keys", json={"title": "one-more", "value": key})
    assert r.status_code == 400 and "at most 50 keys" in r.json()["message"]


@pytest.mark.parametrize(
    ("body", "ctype", "status", "code"),
    [
        (b"{not json", "application/json", 400, "InvalidProtocolError"),
        (b"name: [unclosed", "text/yaml", 400, "InvalidProtocolError"),
        (b"jobName: x", "application/xml", 415, "UnsupportedMediaTypeError"),
        (b"jobName=x", "application/x-www-form-urlencoded", 415, "UnsupportedMediaTypeError"),
        (b"", "text/yaml", 400, "InvalidProtocolError"),
        (b"\xff\xfe", "text/yaml", 400, "InvalidProtocolError"),
    ],
)
def test_bad_submissions_are_refused_and_nothing_is_written(
    shared_daemon: Api, body: bytes, ctype: str, status: int, code: str
) -> None:
    daemon = shared_daemon
    r = daemon.http.post("/api/v2/jobs", content=body, headers={"Content-Type": ctype})
    assert r.status_code == status, r.text
    assert r.json()["code"] == code
    assert daemon.http.get("/api/v2/jobs").json() == []


def test_invalid_protocol_lists_every_field_path(shared_daemon: Api) -> None:
    daemon = shared_daemon
    bad = {
        "jobName": "bad name",
        "image": "x",
        "taskRoles": [
            {"name": "main", "taskNumber": 0, "cpuNumber": 1, "memoryMB": 50, "gpuNumber": 0, "command": "true"}
        ],
    }
    r = daemon.submit(json.dumps(bad))
    assert r.status_code == 400 and r.json()["code"] == "InvalidProtocolError"
    paths = {p["path"] for p in r.json()["problems"]}
    assert {"jobName", "taskRoles[0].taskNumber", "taskRoles[0].memoryMB"} <= paths
    assert "taskRoles[0].memoryMB: 50 is below the minimum 100" in r.json()["message"]


def test_body_over_the_cap_is_413(shared_daemon: Api) -> None:
    daemon = shared_daemon
    big = b"jobName: x\n# " + b"a" * (5 * 1024 * 1024)
    r = daemon.http.post("/api/v2/jobs", content=big, headers={"Content-Type": "text/yaml"})
    assert r.status_code == 413 and r.json()["code"] == "PayloadTooLargeError"


def test_duplicate_name_is_409_and_unknown_job_404(daemon: Api) -> None:
    daemon.submit_ok(v1("dup", "true"))
    r = daemon.submit(v1("dup", "true"))
    assert r.status_code == 409 and r.json()["code"] == "ConflictJobError"
    user = daemon.detail(f"{r.request.headers and daemon.http.get('/api/v2/info').json()['user']}~dup")
    assert user["name"] == "dup"
    r = daemon.http.get("/api/v2/jobs/nobody~nothing")
    assert r.status_code == 404 and r.json()["code"] == "NoJobError"
    assert daemon.stop("nobody~nothing").status_code == 404


def test_list_filters_paging_order_and_total(daemon: Api) -> None:
    for i in range(5):
        daemon.submit_ok(v1(f"list{i}", "true" if i % 2 else "exit 1"))
    for i in range(5):
        daemon.wait(f"{daemon.http.get('/api/v2/info').json()['user']}~list{i}")
    r = daemon.http.get(
        "/api/v2/jobs", params={"withTotalCount": "true", "limit": 2, "offset": 1, "order": "jobName,ASC"}
    )
    body = r.json()
    assert body["totalCount"] == 5 and [j["name"] for j in body["data"]] == ["list1", "list2"]
    failed = daemon.http.get("/api/v2/jobs", params={"state": "FAILED"}).json()
    assert sorted(j["name"] for j in failed) == ["list0", "list2", "list4"]
    assert [j["name"] for j in daemon.http.get("/api/v2/jobs", params={"keyword": "st3"}).json()] == ["list3"]
    item = failed[0]
    for key in (
        "name",
        "username",
        "state",
        "subState",
        "executionType",
        "retries",
        "submissionTime",
        "createdTime",
        "launchedTime",
        "completedTime",
        "appExitCode",
        "virtualCluster",
        "totalGpuNumber",
        "totalTaskNumber",
        "totalTaskRoleNumber",
    ):
        assert key in item
    assert daemon.http.get("/api/v2/jobs", params={"limit": "x"}).status_code == 400


def test_config_is_returned_as_submitted(daemon: Api) -> None:
    text = v1("cfg", "echo  spaced")
    name = daemon.submit_ok(text)
    assert daemon.http.get(f"/api/v2/jobs/{name}/config").text == text


def test_events_tell_the_story(daemon: Api) -> None:
    name = daemon.submit_ok(v1("story", "true"))
    daemon.wait(name)
    reasons = [e["reason"] for e in daemon.http.get(f"/api/v2/jobs/{name}/events").json()["data"]]
    assert reasons[-1] == "Submitted" and "TaskStarted" in reasons and reasons[0] == "JobSucceeded"  # newest first


def test_logs_tail_is_the_last_16_kib_on_a_line_boundary(daemon: Api) -> None:
    name = daemon.submit_ok(v1("chatty", 'i=0; while [ $i -lt 3000 ]; do echo "line $i ✓"; i=$((i+1)); done'))
    daemon.wait(name)
    full = daemon.log(name, name="stdout")
    tail = daemon.log(name, name="stdout", tail=True)
    assert full.endswith("line 2999 ✓\n") and tail.endswith("line 2999 ✓\n")
    assert len(tail.encode()) <= 16 * 1024 and tail.startswith("line ")
    assert full.endswith(tail)


def test_live_stream_follows_until_the_task_ends(daemon: Api) -> None:
    """The stream hands on each line as it is written: the task writes its last ones only once this test has read
    its first from the stream (no timing: under load a stream opened late would read the first lines at once)."""
    command = "for i in 1 2 3; do echo tick $i; done; until [ -e go ]; do sleep 0.05; done; echo tick 4; echo tick 5"
    name = daemon.submit_ok(v1("stream", command))
    go = daemon.home / "local" / "jobs" / name / "a0.main-0.t0" / "work" / "go"
    lines: list[str] = []
    with daemon.http.stream("GET", f"/api/v2/local/jobs/{name}/logs/stream", params={"stream": "stdout"}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            lines.append(line)
            if line == "tick 3":  # read while the task still runs: it waits for this
                go.touch()
    assert [s for s in lines if s.startswith("tick")] == [f"tick {i}" for i in range(1, 6)]
    assert daemon.wait(name)["jobStatus"]["state"] == "SUCCEEDED"


def test_many_concurrent_clients_get_no_duplicates(daemon: Api) -> None:
    """20 clients x 50 submits -> 1,000 jobs; every name once; a resubmitted name is 409; the DB is intact."""
    results: list[int] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {daemon.token}"}, timeout=60) as http:
            for i in range(50):
                r = http.post(
                    "/api/v2/jobs",
                    content=v1(f"c{n}-{i}", "true").encode(),
                    headers={"Content-Type": "application/json"},
                )
                with lock:
                    results.append(r.status_code)
            r = http.post(
                "/api/v2/jobs", content=v1(f"c{n}-0", "true").encode(), headers={"Content-Type": "application/json"}
            )
            with lock:
                results.append(r.status_code)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(202) == 1000 and results.count(409) == 20 and len(results) == 1020
    jobs = daemon.http.get("/api/v2/jobs", params={"withTotalCount": "true"}).json()
    names = [j["name"] for j in jobs["data"]]
    assert jobs["totalCount"] == 1000 and len(set(names)) == 1000
    from pai_jupyter.cluster import control

    control.stop(daemon.home)
    db = sqlite3.connect(f"file:{daemon.home / 'local' / 'state.db'}?mode=ro", uri=True)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT count(*) FROM jobs").fetchone()[0] == 1000
