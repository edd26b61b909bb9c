"""OpenPAI's job status change notification: a job's ``extras.jobStatusChangeNotification`` names the changes its
owner wants to hear of (``running``, ``succeeded``, ``failed``, ``stopped``, ``retried``: true), as OpenPAI's
job-status-change-notification service reads it (RUNNING once, at the job's first start; RETRIED at every retry).
OpenPAI hands them to its alert-manager, which mails the user; here they go out as an e-mail to the owner's address
through the cluster's SMTP server, and as a JSON POST to a webhook (the job's ``webhook`` key in that mapping, else
the cluster's). Both are sent in the background: a slow or refused delivery never holds up the event loop nor
changes the job, and is logged and recorded as the job's ``NotificationFailed`` event."""

from __future__ import annotations

import asyncio
import json
import logging
import smtplib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.netutil import Resolver
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from ...protocol import Job
from ...protocol.rules import NOTIFY_KEY, NOTIFY_STATES
from ..paths import cluster_config
from .store import JobCore, Store, now_ms
from .webhook import VettingResolver

log = logging.getLogger("pai_jupyter.cluster")
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class NotifyConfig:
    """Where notifications go: an SMTP server (no TLS, no login: a relay on the host or the site's), the sender's
    address, and a webhook for every job that asks for notification and names none of its own."""

    smtp_host: str | None = None
    smtp_port: int = 25
    mail_from: str = "pai@localhost"
    webhook: str | None = None

    @classmethod
    def load(
        cls, local: Path, smtp: str | None = None, mail_from: str | None = None, webhook: str | None = None
    ) -> NotifyConfig:
        """The daemon's flags, else ``notification: {smtp: HOST:PORT, mailFrom: ADDR, webhook: URL}`` in the
        cluster's ``local/cluster.yaml``."""
        path = local / "cluster.yaml"
        found = cluster_config(local).get("notification") or {}
        if not isinstance(found, dict):
            raise ValueError(f"{path}: notification must be a mapping (smtp, mailFrom, webhook)")
        smtp = smtp or found.get("smtp")
        host, port = split_host_port(str(smtp)) if smtp else (None, 25)
        return cls(
            host, port, str(mail_from or found.get("mailFrom") or cls.mail_from), webhook or found.get("webhook")
        )


def split_host_port(value: str) -> tuple[str, int]:
    """``HOST[:PORT]`` (``[::1]:25`` for IPv6): the SMTP server's address, port 25 by default."""
    host, sep, port = value.rpartition(":")
    if not sep or (":" in host and not host.startswith("[")):
        return value.strip("[]"), 25
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def summary(name: str, state: str, retries: int) -> str:
    """OpenPAI's words for each change."""
    return {
        "RUNNING": f"The job {name} has started running.",
        "SUCCEEDED": f"The job {name} has succeeded.",
        "FAILED": f"The job {name} has failed.",
        "STOPPED": f"The job {name} has been stopped.",
        "RETRIED": f"The job {name} has retried for {retries} time(s).",
    }[state]


class Notifier:
    """Sends what a job asked for when its state changes (``changed``, called where the state is written)."""

    def __init__(self, store: Store, config: NotifyConfig | None = None, resolver: Resolver | None = None):
        """``resolver``: how a user's webhook is resolved and vetted (``webhook.VettingResolver``; tests wrap it)."""
        self.store = store
        self.config = config or NotifyConfig()
        self.resolver = resolver
        self._pending: set[asyncio.Task[None]] = set()
        self._mailer: ThreadPoolExecutor | None = None
        self._guarded: SimpleAsyncHTTPClient | None = None

    def changed(self, row: JobCore, job: Job, state: str) -> None:
        """Job ``row`` became ``state`` (RUNNING, SUCCEEDED, FAILED, STOPPED, or RETRIED: a new attempt): send it
        in the background if the job asked for it. RUNNING counts once: at the first attempt's start."""
        wanted = job.extras.get(NOTIFY_KEY)
        if not isinstance(wanted, dict) or wanted.get(NOTIFY_STATES.get(state, "")) is not True:
            return
        if state == "RUNNING" and row["attempt"] != 0:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (only the daemon's loop sends; a tool that opens the store sends nothing)
            log.warning("job %s~%s became %s with no event loop to notify from", row["user"], row["name"], state)
            return
        own = wanted.get("webhook")
        payload = {
            "job": f"{row['user']}~{row['name']}",
            "username": row["user"],
            "jobName": row["name"],
            "state": state,
            "retries": row["retries"],
            "virtualCluster": row["vc"],
            "exitCode": row["exit_code"] if state in ("SUCCEEDED", "FAILED") else None,
            "exitDiagnostics": row["exit_diagnostics"] if state in ("FAILED", "STOPPED") else None,
            "summary": summary(row["name"], state, row["retries"]),
            "time": now_ms(),
        }
        own_hook = own if isinstance(own, str) else None
        task = loop.create_task(self._deliver(row["id"], payload, own_hook or self.config.webhook, bool(own_hook)))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        """Wait for the deliveries under way (tests; a stopping daemon)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def _deliver(self, job_id: int, payload: dict[str, Any], webhook: str | None, users: bool = False) -> None:
        address = self.store.email_of(payload["username"])
        channels = []
        if self.config.smtp_host and address:
            channels.append((f"e-mail to {address}", self._mail(address, payload)))
        if webhook:
            channels.append((f"webhook {webhook}", self.post(webhook, payload, guard=users)))
        if not channels:
            self._record(
                job_id,
                "Warning",
                "NotificationFailed",
                f"{payload['state']}: nowhere to send it (the cluster has no SMTP server or {payload['username']} "
                "no e-mail address, and no webhook is set)",
            )
            return
        results = await asyncio.gather(*(send for _, send in channels), return_exceptions=True)
        for (what, _), result in zip(channels, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("notifying %s of %s by %s failed: %r", payload["job"], payload["state"], what, result)
                self._record(job_id, "Warning", "NotificationFailed", f"{payload['state']}: {what} failed: {result}")
            else:
                self._record(job_id, "Normal", "NotificationSent", f"{payload['state']}: {what}")

    async def _mail(self, address: str, payload: dict[str, Any]) -> None:
        msg = EmailMessage()
        msg["From"], msg["To"] = self.config.mail_from, address
        msg["Subject"] = f"[PAI] job {payload['job']} {payload['state']}"
        msg.set_content(f"{payload['summary']}\n\n" + json.dumps(payload, indent=2) + "\n")
        if self._mailer is None:
            self._mailer = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pai-mail")
        await asyncio.get_running_loop().run_in_executor(self._mailer, self._send_mail, msg)

    def _send_mail(self, msg: EmailMessage) -> None:
        assert self.config.smtp_host is not None
        with smtplib.SMTP(self.config.smtp_host, self.config.smtp_port, timeout=TIMEOUT_S) as smtp:
            smtp.send_message(msg)

    async def post(self, url: str, payload: dict[str, Any], guard: bool = False) -> None:
        """POST the payload. A webhook a user named in their job (``guard``) goes only to the public addresses its
        name resolved to, once (``webhook.py``): the daemon (root) must not become a way into services that trust
        this machine or its networks."""
        request = HTTPRequest(
            url,
            method="POST",
            body=json.dumps(payload),
            headers={"Content-Type": "application/json"},
            connect_timeout=TIMEOUT_S,
            request_timeout=TIMEOUT_S,
            follow_redirects=False,
        )
        if not guard:
            await AsyncHTTPClient().fetch(request)
            return
        if self._guarded is None:  # its own client: the shared one resolves names as it likes
            resolver = self.resolver or VettingResolver()
            self._guarded = SimpleAsyncHTTPClient(force_instance=True, resolver=resolver)
        await self._guarded.fetch(request)

    def _record(self, job_id: int, type_: str, reason: str, message: str) -> None:
        try:
            with self.store.tx():
                if self.store.job_core(job_id) is not None:  # (deleted meanwhile: nothing to record it on)
                    self.store.add_event(job_id, type_, reason, message)
        except Exception:
            log.exception("recording a notification of job %s failed", job_id)
