"""OpenPAI's routes that say what a cluster has, answered with what the embedded cluster has, so that OpenPAI's
clients (its JS SDK's ``storage``, ``group``, ``virtualCluster.getVirtualClusterSkuTypes`` and
``kubernetes.getK8sNodes``) get answers instead of ``NoApiError``:

- storages (OpenPAI's PV storages): none, so the list is empty and any one is ``NoStorageError``;
- groups: ``admingroup`` (the admins) and one per virtual cluster, which every user may use (their ``grouplist``);
- SKU types: one, the share of the machines per GPU (per CPU on machines without GPUs), as OpenPAI's hived
  scheduler's leaf cells; the same in every virtual cluster, since they share the machines;
- Kubernetes nodes (admins only, as OpenPAI): a Kubernetes ``NodeList`` of the machines tasks run on.

Shapes follow OpenPAI's server code (controllers/v2/storage.js, group.js, cluster.js, routes/kubernetes.js)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..core.errors import ForbiddenUserError, NoGroupError, NoStorageError, NoVirtualClusterError
from ..runtime.base import LOCAL_NODE, Node
from .base import Base, Route

if TYPE_CHECKING:
    from ..core.service import Cluster

ADMIN_GROUP = "admingroup"


def group_names(cluster: Cluster, admin: bool) -> list[str]:
    """A user's ``grouplist``: every virtual cluster's group, and the admins' group for an admin."""
    return ([ADMIN_GROUP] if admin else []) + sorted(cluster.capacity.quotas)


def _groups(cluster: Cluster) -> dict[str, dict[str, Any]]:
    vcs = sorted(cluster.capacity.quotas)

    def group(name: str, description: str, admin: bool, members: list[str]) -> dict[str, Any]:
        acls = {"admin": admin, "virtualClusters": members, "storageConfigs": []}
        return {"groupname": name, "description": description, "externalName": "", "extension": {"acls": acls}}

    out = {ADMIN_GROUP: group(ADMIN_GROUP, "the cluster's admins", True, vcs)}
    for vc in vcs:
        out.setdefault(vc, group(vc, f"users of the virtual cluster {vc}", False, [vc]))
    return out


class Storages(Base):
    def get(self) -> None:
        self.write_json({"storages": []})


class Storage(Base):
    def get(self, name: str) -> None:
        raise NoStorageError(f"Storage {name} is not found.")


class Groups(Base):
    def get(self) -> None:
        self.write_json(list(_groups(self.cluster).values()))


class Group(Base):
    def get(self, name: str) -> None:
        found = _groups(self.cluster).get(name)
        if found is None:
            raise NoGroupError(f"Group {name} is not found.")
        self.write_json(found)


class GroupMembers(Base):
    def get(self, name: str) -> None:
        if not self.is_admin:
            raise ForbiddenUserError(f"User {self.user['name']} is not allowed to do this operation.")
        users = self.cluster.store.users()
        self.write_json(
            [
                {"username": u["name"], "clusterAdmin": bool(u["admin"])}
                for u in users
                if name in group_names(self.cluster, bool(u["admin"]))
            ]
        )


def sku_types(cluster: Cluster) -> dict[str, dict[str, int]]:
    """The cluster's one SKU: its machines' share per GPU, or per CPU where they have none (memory in MB)."""
    total = cluster.capacity.total
    per, name = (total.gpu, "gpu") if total.gpu else (max(total.cpu, 1), "cpu")
    unit = {"cpu": max(total.cpu // per, 1), "memory": total.memory_mb // per, "gpu": 1 if total.gpu else 0}
    return {name: unit}


class SkuTypes(Base):
    """``GET /api/v2/cluster/sku-types[?vc=NAME]`` (OpenPAI 2.2.7), and ``/api/v2/virtual-clusters/NAME/sku-types``
    (the JS SDK's, from OpenPAI before it)."""

    def get(self, vc: str | None = None) -> None:
        vc = vc if vc is not None else self.get_query_argument("vc", None)
        if vc is not None and vc not in self.cluster.capacity.quotas:
            raise NoVirtualClusterError(f"Cannot get sku types for virtual cluster {vc}.")
        self.write_json(sku_types(self.cluster))


def _k8s_node(node: Node) -> dict[str, Any]:
    has = {"cpu": str(node.cpu), "memory": f"{node.memory_mb}Mi", "nvidia.com/gpu": str(node.gpu), "pods": "110"}
    addresses = [{"type": "Hostname", "address": node.name}]
    if node.address != node.name:
        addresses.insert(0, {"type": "InternalIP", "address": node.address})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": {"kubernetes.io/hostname": node.name, "pai-worker": "true"}},
        "spec": {"unschedulable": not node.ready},
        "status": {
            "capacity": has,
            "allocatable": has,
            "addresses": addresses,
            "conditions": [{"type": "Ready", "status": "True" if node.ready else "False"}],
        },
    }


class K8sNodes(Base):
    async def get(self) -> None:
        if not self.is_admin:
            raise ForbiddenUserError(f"User {self.user['name']} is not allowed to do this operation.")
        runtime, total = self.cluster.runtime, self.cluster.capacity.total
        nodes = await asyncio.to_thread(runtime.nodes)  # a batch system's are asked of it (sinfo)
        if nodes is None:
            nodes = [Node(LOCAL_NODE, runtime.host_ip, total.cpu, total.memory_mb, total.gpu)]
        self.write_json(
            {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [_k8s_node(n) for n in nodes]}
        )


def routes(args: dict[str, Any]) -> list[Route]:
    return [
        (r"/api/v2/storages", Storages, args),
        (r"/api/v2/storages/([^/]+)", Storage, args),
        *[(rf"/api/v2/{g}", Groups, args) for g in ("groups", "group")],  # OpenPAI serves both
        *[(rf"/api/v2/{g}/([^/]+)", Group, args) for g in ("groups", "group")],
        *[(rf"/api/v2/{g}/([^/]+)/userlist", GroupMembers, args) for g in ("groups", "group")],
        (r"/api/v2/cluster/sku-types", SkuTypes, args),
        (r"/api/v2/virtual-clusters/([^/]+)/sku-types", SkuTypes, args),
        (r"/api/v[12]/kubernetes/nodes", K8sNodes, args),
    ]
