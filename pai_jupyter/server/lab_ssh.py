"""``GET pai/api/jobs/{user}~{name}/ssh``: how to log in to each task of the job, for the Lab's SSH dialog.

The same targets ``pai ssh-info`` prints (``client.ssh.ssh_info``): the host, port and user of each task's sshd,
the job key saved beside this server's profile (the Lab's own terminal runs on this machine, so the exact ``ssh``
command works there as shown, with the host key pinned), and the shorter ``pai ssh`` form.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from tornado import web

from ..client import JobNotFound, NotSupported, PaiError
from ..client.ssh import ssh_info
from .answers import SshInfo, SshTask
from .common import JOB_RE
from .lab_base import LabHandler

NO_SSH = (
    "this job has no ssh plugin, so its tasks run no sshd (add `- plugin: ssh` under "
    "extras.com.microsoft.pai.runtimeplugin)"
)


def shell_word(text: str) -> str:
    """``text`` as one shell word: bare where the shell reads it as it is (``root~job``), else quoted."""
    return text if re.fullmatch(r"[A-Za-z0-9_.@%+=:,/-][A-Za-z0-9_.@%+=:,/~-]*", text) else shlex.quote(text)


def target_json(job: str, t: Any) -> SshTask:
    """One task's login: address, user, key, and the commands (none while it has no address yet)."""
    ready = bool(t.host and t.port)
    pai = f"pai ssh {shell_word(job)} --role {shell_word(t.role)} --index {t.index}"
    return {
        "role": t.role,
        "index": t.index,
        "state": t.state,
        "host": t.host,
        "port": t.port,
        "user": t.user,
        "key": t.key,
        "problem": t.problem,
        "ssh": t.commands()["ssh"] if ready else None,
        "pai": pai,
    }


class SshHandler(LabHandler):
    @web.authenticated
    async def get(self, user: str, name: str) -> None:
        job = self.registry.job_id(user, name)
        try:
            targets = await ssh_info(self.client, job)
        except NotSupported as exc:
            self.answer({"id": job, "tasks": [], "message": exc.message})
            return
        except JobNotFound:  # the embedded cluster's answer for a job without the plugin, too
            await self.call(f"detail of {job}", self.client.detail(job))  # a missing job stays a 404
            self.answer({"id": job, "tasks": [], "message": NO_SSH})
            return
        except PaiError as exc:
            raise self.failure(f"ssh of {job}", exc) from None
        self.answer({"id": job, "tasks": [target_json(job, t) for t in targets], "message": None})

    def answer(self, info: SshInfo) -> None:
        self.send(info)


def route_specs(pai: str, args: dict[str, Any]) -> list[tuple[str, type, dict[str, Any]]]:
    return [(pai + "/api/jobs/" + JOB_RE + "/ssh", SshHandler, args)]
