"""The rest of OpenPAI's routes that its own clients call (its JS SDK, openpaisdk, the portal): login and
tokens, info, users, virtual clusters, job detail by attempt, task attempts, one job attempt, tags, and the v1
routes OpenPAI still serves. Shapes follow OpenPAI's server code (controllers/v2, models/v2)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ...common.version import __version__
from ..core.errors import BadRequest, ForbiddenUserError, NoTagError, NotFoundError, NoUserError, NoVirtualClusterError
from ..core.store import APPLICATION, JobCore, UserSummary, hash_token
from . import peer, views
from .authn import LoginLimiter, login, login_body
from .base import JOB, MAX_INT, Base, Route, authenticate, request_token
from .inventory import group_names

if TYPE_CHECKING:
    from ..core.service import Cluster

TAG = re.compile(r"^.{1,255}$", re.S)


class Login(Base):
    public = True

    def initialize(self, cluster: Cluster, limiter: LoginLimiter) -> None:  # type: ignore[override]
        super().initialize(cluster)
        self.limiter = limiter

    async def post(self) -> None:
        data = login_body(self.request.headers.get("Content-Type", ""), self.request.body)
        self.write_json(await login(self.cluster.store, self.limiter, data, peer.client_key(self.request)))


class V1Token(Login):
    """``/api/v1/token``: POST logs in (as v1 did), GET lists the caller's tokens."""

    async def get(self) -> None:
        self.user = await authenticate(self.request, self.cluster, self.hub)
        self.write_json({"tokens": [t["id"] for t in self.cluster.store.tokens(self.user["name"])]})


class NotApplication(Base):
    """A token route: an application token may not use it (OpenPAI's tokenMiddleware.checkNotApplication)."""

    async def prepare(self) -> None:
        await super().prepare()
        token = request_token(self.request, self.cluster)
        if token is not None and self.cluster.store.token_label(token) == APPLICATION:
            raise ForbiddenUserError("Applications are not allowed to do this operation.")


class ApplicationToken(NotApplication):
    """``POST /api/v2/tokens/application``: a token for job operations only, until revoked; also taken as
    ``Authorization: Basic base64(<user>:<token>)``, as OpenPAI takes it."""

    def post(self) -> None:
        self.write_json({"token": self.cluster.store.new_token(self.user["name"], APPLICATION), "application": True})


class Tokens(NotApplication):
    """OpenPAI lists the tokens themselves; ours are stored hashed, so each is listed by an id that
    ``DELETE /api/v2/tokens/{token}`` takes as well as the token."""

    def get(self) -> None:
        self.write_json({"tokens": [t["id"] for t in self.cluster.store.tokens(self.user["name"])]})


class Token(NotApplication):
    """A user revokes their own tokens; an admin anyone's (a leaked token is revoked without its user)."""

    def delete(self, token: str) -> None:
        store = self.cluster.store
        digest = store.find_token(token, None if self.is_admin else self.user["name"])
        if digest is None:
            raise ForbiddenUserError(f"User {self.user['name']} is not allowed to do this operation.")
        store.revoke_token(digest)
        self.write_json({"message": "revoke successfully"})


class Logout(Base):
    """``DELETE /api/v[12]/authn/basic/logout``: revoke the token this request carries."""

    def delete(self) -> None:
        _, _, token = self.request.headers.get("Authorization", "").partition(" ")
        self.cluster.store.revoke_token(hash_token(token.strip()))
        self.write_json({"message": "Logout successfully"})


class Info(Base):
    """Public, as on OpenPAI; with a valid token the embedded cluster adds its capacity, runtime and user."""

    public = True

    async def get(self) -> None:
        body: dict[str, Any] = {
            "name": "PAI RESTful API",
            "version": __version__,
            "launcherType": "k8s",
            "authnMethod": "basic",
        }
        if "Authorization" in self.request.headers:
            user = await authenticate(self.request, self.cluster, self.hub)  # a wrong token is still refused (401)
            cap = self.cluster.capacity
            body.update(
                {
                    "cluster": "pai_jupyter local cluster",
                    "runtime": self.cluster.runtime_description,
                    "capacity": {"cpu": cap.total.cpu, "memoryMB": cap.total.memory_mb, "gpu": cap.total.gpu},
                    "used": {"cpu": cap.used.cpu, "memoryMB": cap.used.memory_mb, "gpu": cap.used.gpu},
                    "virtualClusters": {
                        k: {"cpu": v.cpu, "memoryMB": v.memory_mb, "gpu": v.gpu} for k, v in cap.quotas.items()
                    },
                    "user": user["name"],
                    "admin": bool(user["admin"]),
                    "local": {"logStream": "/api/v2/local/jobs/{user}~{name}/logs/stream", "delete": True},
                }
            )
        self.write_json(body)


class Index(Base):
    public = True

    def get(self) -> None:
        if self.request.path.startswith("/api/v2"):
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish("PAI RESTful API v2 (beta version)")
            return
        self.write_json(
            {"name": "PAI RESTful API", "version": __version__, "launcherType": "k8s", "authnMethod": "basic"}
        )


def _user_info(cluster: Cluster, row: UserSummary) -> dict[str, Any]:
    vcs = sorted(cluster.capacity.quotas)
    return {
        "username": row["name"],
        "grouplist": group_names(cluster, bool(row["admin"])),
        "email": "",
        "extension": {},
        "admin": bool(row["admin"]),
        "virtualCluster": vcs,
        "storageConfig": [],
    }


class User(Base):
    def get(self, name: str) -> None:
        if name != self.user["name"] and not self.is_admin:
            raise ForbiddenUserError(f"User {self.user['name']} is not allowed to do this operation.")
        row = self.cluster.store.user(name)
        if row is None:
            raise NoUserError(f"User {name} is not found.", status=400)
        self.write_json(_user_info(self.cluster, row))


class Users(Base):
    def get(self) -> None:
        if not self.is_admin:
            raise ForbiddenUserError(f"User {self.user['name']} is not allowed to do this operation.")
        self.write_json([_user_info(self.cluster, r) for r in self.cluster.store.users()])


def _vc_info(cluster: Cluster, name: str) -> dict[str, Any]:
    cap = cluster.capacity
    quota, used = cap.quotas[name], cap.used_by_vc.get(name)
    total_gpu = sum(q.gpu for q in cap.quotas.values())

    def res(cpu: int, memory: int, gpu: int) -> dict[str, int]:
        return {"cpu": cpu, "memory": memory, "gpu": gpu, "vCores": cpu, "GPUs": gpu}

    capacity = quota.gpu / total_gpu * 100 if total_gpu else 0
    return {
        "capacity": capacity,
        "maxCapacity": capacity,
        "usedCapacity": (used.gpu if used else 0) / total_gpu * 100 if total_gpu else 0,
        "dedicated": False,
        "resourcesUsed": res(used.cpu, used.memory_mb, used.gpu) if used else res(0, 0, 0),
        "resourcesGuaranteed": res(quota.cpu, quota.memory_mb, quota.gpu),
        "resourcesTotal": res(quota.cpu, quota.memory_mb, quota.gpu),
    }


class VirtualClusters(Base):
    def get(self) -> None:
        self.write_json({name: _vc_info(self.cluster, name) for name in self.cluster.capacity.quotas})


class VirtualCluster(Base):
    def get(self, name: str) -> None:
        if name not in self.cluster.capacity.quotas:
            raise NoVirtualClusterError(f"Vc {name} not found")
        self.write_json(_vc_info(self.cluster, name))


def _attempt_number(raw: str, row: JobCore) -> int:
    number = int(raw) if len(raw) < 12 else MAX_INT + 1
    if number > row["attempt"]:
        raise NotFoundError(f"Job attempt not found in job {row['user']}~{row['name']} with jobAttemptIndex {raw}")
    return number


class JobAtAttempt(Base):
    """``GET /api/v2/jobs/{user}~{name}/attempts/{attempt}``: the job detail as that attempt left it."""

    def get(self, user: str, name: str, attempt: str) -> None:
        row = self.own_job(user, name)
        number = _attempt_number(attempt, row)
        job = self.cluster.job_model(row)
        tasks = self.cluster.store.tasks(row["id"], number)
        body = views.detail(
            row,
            self.cluster.store.list_item(row["id"]),
            tasks,
            [r.name for r in job.task_roles],
            self.cluster.waiting_reason(row) if number == row["attempt"] else None,
        )
        if number != row["attempt"]:
            body["jobStatus"].update(views.attempt_status(self.cluster.store.attempt(row["id"], number)))
        self.write_json(body)


class TaskAttempts(Base):
    """``GET .../attempts/{a}/taskRoles/{role}/taskIndex/{i}/attempts``: a task and its attempts, newest first."""

    def get(self, user: str, name: str, attempt: str, role: str, idx: str) -> None:
        row = self.own_job(user, name)
        number = _attempt_number(attempt, row)
        task = self.cluster.store.task(row["id"], number, role, int(idx)) if len(idx) < 12 else None
        if task is None:
            raise NotFoundError(
                f"Task not found in Job {user}~{name} with jobAttemptIndex {attempt}, taskRoleName "
                f"{role} and taskIndex {idx}."
            )
        self.write_json(views.task_detail(row, task))


class JobAttemptOne(Base):
    def get(self, user: str, name: str, attempt: str) -> None:
        row = self.own_job(user, name)
        number = _attempt_number(attempt, row)
        found = self.cluster.store.attempt(row["id"], number)
        if found is None:
            raise NotFoundError(f"Job attempt not found in job {user}~{name} with jobAttemptIndex {attempt}")
        tasks = self.cluster.store.tasks(row["id"], number)
        priority = row["priority"]
        self.write_json({**views.attempt_item(row, found, tasks, priority), "isLatest": True})


class JobAttemptsHealth(Base):
    def get(self, user: str, name: str) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish("ok")


class Tag(Base):
    def _tag(self) -> str:
        value = self.json_body().get("value")
        if not isinstance(value, str) or not TAG.match(value):
            raise BadRequest('the body must be {"value": "<tag>"} (1 to 255 characters)')
        return value

    def put(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        tag = self._tag()
        self.cluster.store.add_tag(row["id"], tag)
        self.write_json({"status": 200, "message": f"Add tag {tag} for job {user}~{name} successfully."})

    def delete(self, user: str, name: str) -> None:
        row = self.own_job(user, name)
        tag = self._tag()
        if not self.cluster.store.delete_tag(row["id"], tag):
            raise NoTagError(f"Tag {tag} is not found for job {user}~{name}.")
        self.write_json({"status": 200, "message": f"Delete tag {tag} from job {user}~{name} successfully."})


def routes(args: dict[str, Any]) -> list[Route]:
    login_args = {**args, "limiter": LoginLimiter()}
    task = JOB + r"/attempts/(\d+)/taskRoles/([^/]+)/taskIndex/(\d+)/attempts"
    return [
        (r"/api/v[12]", Index, args),
        (r"/api/v[12]/authn/basic/login", Login, login_args),
        (r"/api/v[12]/authn/basic/logout", Logout, args),
        (r"/api/v2/tokens/application", ApplicationToken, args),
        (r"/api/v1/token/application", ApplicationToken, args),
        (r"/api/v1/token", V1Token, login_args),
        (r"/api/v1/token/(?!application$)([^/]+)", Token, args),
        (r"/api/v2/tokens", Tokens, args),
        (r"/api/v2/tokens/(?!application$)([^/]+)", Token, args),
        (r"/api/v2/info", Info, args),
        (r"/api/v2/users", Users, args),
        (r"/api/v2/users/([^/]+)", User, args),
        (r"/api/v2/user/([^/]+)", User, args),
        (r"/api/v1/user/([^/]+)", User, args),
        (r"/api/v2/virtual-clusters", VirtualClusters, args),
        (r"/api/v2/virtual-clusters/([^/]+)", VirtualCluster, args),
        (JOB + r"/attempts/(\d+)", JobAtAttempt, args),
        (task, TaskAttempts, args),
        (JOB + r"/job-attempts/healthz", JobAttemptsHealth, args),
        (JOB + r"/job-attempts/(\d+)", JobAttemptOne, args),
        (JOB + r"/tag", Tag, args),
    ]
