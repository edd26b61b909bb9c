"""extras.jobStatusChangeNotification (core/notify.py) end to end: a real daemon started with ``--smtp`` mails the
owner through a real SMTP server (aiosmtpd) on 127.0.0.1 and POSTs to a real HTTP server there; each change the
job asked for arrives once (RUNNING at the first start only, RETRIED at each retry), and a refused delivery is
a NotificationFailed event on a job that ends as it would have."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from pai_jupyter.cluster import control
from pai_jupyter.common.localserver import free_port
from tests.helpers.daemon import Api, kill_leftovers, start_daemon
from tests.polling import wait_for


class Inbox:
    """An aiosmtpd handler that keeps what it is sent."""

    def __init__(self) -> None:
        self.mails: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mails.append((list(envelope.rcpt_tos), message_from_bytes(envelope.original_content)))
        return "250 OK"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())  # (it checks it answers: no port 0)
    controller.start()
    try:
        yield inbox, controller.port
    finally:
        controller.stop()


@pytest.fixture
def hook() -> Iterator[tuple[list[dict[str, Any]], str]]:
    posts: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.headers["Content-Type"] == "application/json"
            posts.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield posts, f"http://127.0.0.1:{server.server_address[1]}/pai"
    finally:
        server.shutdown()
        server.server_close()


def job(name: str, command: str, notify: dict[str, Any] | None, retry_count: int = 0) -> str:
    role = {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 256, "gpuNumber": 0, "command": command}
    doc: dict[str, Any] = {"jobName": name, "image": "busybox", "retryCount": retry_count, "taskRoles": [role]}
    if notify is not None:
        doc["extras"] = {"jobStatusChangeNotification": notify}
    return json.dumps(doc)


def reasons(api: Api, name: str) -> list[tuple[str, str]]:
    data = api.http.get(f"/api/v2/jobs/{name}/events").json()["data"]
    return [(e["reason"], e["message"]) for e in data if e["reason"].startswith("Notification")]


def test_each_change_asked_for_is_mailed_and_posted_once(
    pai_home: Path, smtp: tuple[Inbox, int], hook: tuple[list[dict[str, Any]], str]
) -> None:
    inbox, port = smtp
    posts, url = hook
    admin = start_daemon(
        pai_home, extra_args=["--smtp", f"127.0.0.1:{port}", "--mail-from", "pai@test", "--notify-webhook", url]
    )
    try:
        alice = admin.new_user("alice", email="alice@example.com")
        ok = alice.submit_ok(job("ok", "true", {"running": True, "succeeded": True, "failed": True}))
        retried = alice.submit_ok(job("retried", "exit 3", {"retried": True, "failed": True}, retry_count=1))
        stopped = alice.submit_ok(job("stopped", "sleep 600", {"stopped": True, "succeeded": True}))
        quiet = alice.submit_ok(job("quiet", "true", None))
        for name in (ok, retried, quiet):
            alice.wait(name)
        alice.wait(stopped, {"RUNNING"})
        assert alice.stop(stopped).status_code == 202
        alice.wait(stopped)

        expected = {("ok", "RUNNING"), ("ok", "SUCCEEDED"), ("retried", "RETRIED"), ("retried", "FAILED")}
        expected.add(("stopped", "STOPPED"))
        wait_for(lambda: len(inbox.mails) >= 5 and len(posts) >= 5, 30, lambda: f"mails {inbox.mails}, posts {posts}")
        assert sorted((p["jobName"], p["state"]) for p in posts) == sorted(expected)
        got = sorted((m["Subject"], tuple(to), m["From"]) for to, m in inbox.mails)
        assert got == sorted((f"[PAI] job alice~{n} {s}", ("alice@example.com",), "pai@test") for n, s in expected)
        retry = next(p for p in posts if p["state"] == "RETRIED")
        assert retry["retries"] == 1 and retry["summary"] == "The job retried has retried for 1 time(s)."
        failed = next(p for p in posts if p["state"] == "FAILED")
        assert failed["job"] == "alice~retried" and failed["exitCode"] == 3 and failed["username"] == "alice"
        mail = next(m for _, m in inbox.mails if m["Subject"].endswith("ok SUCCEEDED"))
        assert "The job ok has succeeded." in mail.get_payload()
        wait_for(lambda: len(reasons(alice, ok)) == 4, 10, lambda: str(reasons(alice, ok)))
        assert {r for r, _ in reasons(alice, ok)} == {"NotificationSent"}
        assert reasons(alice, quiet) == []
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)


def test_a_refused_delivery_is_an_event_and_the_job_ends_as_it_would(
    pai_home: Path, smtp: tuple[Inbox, int], hook: tuple[list[dict[str, Any]], str]
) -> None:
    """The job's own webhook points at this machine (a user's job must not make root POST to loopback services):
    not sent; the cluster's SMTP server is configured in cluster.yaml: the mail goes out, the refused POST is a
    NotificationFailed event, the job has SUCCEEDED all the same.
    A user with no address and no webhook anywhere gets an event that says so."""
    inbox, port = smtp
    local = pai_home / "local"
    local.mkdir(parents=True, mode=0o700)
    (local / "cluster.yaml").write_text(f"notification:\n  smtp: 127.0.0.1:{port}\n  mailFrom: ops@test\n")
    admin = start_daemon(pai_home)
    try:
        alice = admin.new_user("alice", email="alice@example.com")
        dead = f"http://127.0.0.1:{free_port()}/gone"
        name = alice.submit_ok(job("refused", "true", {"succeeded": True, "webhook": dead}))
        assert alice.wait(name)["jobStatus"]["state"] == "SUCCEEDED"
        found = wait_for(lambda: reasons(alice, name) if len(reasons(alice, name)) == 2 else None, 30)
        assert sorted(r for r, _ in found) == ["NotificationFailed", "NotificationSent"]
        failed = next(m for r, m in found if r == "NotificationFailed")
        assert failed.startswith(f"SUCCEEDED: webhook {dead} failed") and "may not point at this machine" in failed
        assert [m["From"] for _, m in inbox.mails] == ["ops@test"]

        bob = admin.new_user("bob")
        lonely = bob.submit_ok(job("lonely", "true", {"succeeded": True}))
        bob.wait(lonely)
        found = wait_for(lambda: reasons(bob, lonely), 30)
        assert found[0][0] == "NotificationFailed" and "nowhere to send it" in found[0][1]
    finally:
        control.stop(pai_home)
        kill_leftovers(pai_home)


def test_bad_settings_are_refused_at_submit(daemon: Api) -> None:
    r = daemon.submit(job("bad", "true", {"running": "yes", "webhook": "file:///etc/passwd"}))
    assert r.status_code == 400, r.text
    assert "jobStatusChangeNotification.running" in r.text and "jobStatusChangeNotification.webhook" in r.text
    r = daemon.http.post("/api/v2/local/users", json={"name": "carol", "email": "not an address"})
    assert r.status_code == 400 and "email" in r.text


# each spelling of this machine a user's webhook was let through by (or might be): IPv4-mapped, IPv4-compatible
# (hex), 6to4 and NAT64 forms of 127.0.0.1, the unspecified address, a name for loopback, and a private address
LOCAL_SPELLINGS = (
    "[::ffff:127.0.0.1]",
    "[::ffff:0.0.0.0]",
    "0.0.0.0",
    "[::ffff:7f00:1]",
    "[2002:7f00:1::]",
    "[64:ff9b::7f00:1]",
    "localhost",
    "10.0.0.1",
)


def test_a_users_webhook_reaches_no_spelling_of_this_machine_nor_a_private_network(
    daemon: Api, hook: tuple[list[dict[str, Any]], str]
) -> None:
    """The root daemon POSTed to a service on 127.0.0.1 through an IPv4-mapped address (Linux connects
    ``[::ffff:127.0.0.1]`` to 127.0.0.1; Python 3.11 does not call it loopback). The listener on 127.0.0.1 gets
    nothing, each job's NotificationFailed event says why, and the jobs end as they would."""
    posts, url = hook
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    alice = daemon.new_user("alice")
    jobs = {}
    for i, host in enumerate(LOCAL_SPELLINGS):
        webhook = f"http://{host}:{port}/pai"
        jobs[alice.submit_ok(job(f"local{i}", "true", {"succeeded": True, "webhook": webhook}))] = webhook
    for name, webhook in jobs.items():
        assert alice.wait(name)["jobStatus"]["state"] == "SUCCEEDED"
        found = wait_for(lambda n=name: reasons(alice, n), 30, f"the notification event of {name}")  # type: ignore[misc]
        assert [r for r, _ in found] == ["NotificationFailed"], (webhook, found)
        assert found[0][1].startswith(f"SUCCEEDED: webhook {webhook} failed"), found
        assert "may not point at this machine or a private network" in found[0][1], (webhook, found)
    assert posts == []
