"""Hypothesis strategies for job documents: v1 jobs and roles and v2 jobs, of the names, labels, env and extras
OpenPAI accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.helpers.jobdocs import v2_doc

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# names valid in both versions (v2's patterns are the stricter ones); st.text over an alphabet is much faster
# to generate than st.from_regex
V2_ROLE_NAMES = st.builds(str.__add__, st.sampled_from(ALNUM[:52] + "_"), st.text(ALNUM + "_", max_size=12))

V2_JOB_NAMES = st.text(ALNUM + "_-", min_size=1, max_size=40)

LABELS = st.builds(str.__add__, st.sampled_from(ALNUM[:52] + "_"), st.text(ALNUM + "_", max_size=9))  # v2's pattern

ENV_KEYS = st.text(ALNUM + "_", min_size=1, max_size=12).filter(lambda k: k != "isDebug")

# free-form extras: not the keys whose values the protocol checks (a list as maxRunTimeMinutes is rightly refused)
CHECKED_EXTRAS = {
    "pai_jupyter.v1",
    "maxRunTimeMinutes",
    "jobStatusChangeNotification",
    "gangAllocation",
    "storages",
    "hivedScheduler",
    "com.microsoft.pai.runtimeplugin",
}

EXTRAS_KEYS = st.text(ALNUM + "._", min_size=1, max_size=20).filter(lambda k: k not in CHECKED_EXTRAS)

TEXT = st.text(max_size=40)

COMMANDS = st.text(min_size=1, max_size=80).filter(lambda c: c.strip())

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63), TEXT, st.floats(allow_nan=False, allow_infinity=False)
)

JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def v1_roles(draw: st.DrawFn, name: str) -> dict[str, Any]:
    tasks = draw(st.integers(1, 5))
    memory = draw(st.integers(100, 1 << 20))
    role: dict[str, Any] = {
        "name": name,
        "taskNumber": tasks,
        "cpuNumber": draw(st.integers(1, 64)),
        "memoryMB": memory,
        "gpuNumber": draw(st.integers(0, 8)),
        "command": draw(COMMANDS),
    }
    if draw(st.booleans()):
        role["shmMB"] = draw(st.integers(0, memory))
    if draw(st.booleans()):
        labels = draw(st.lists(LABELS, max_size=4, unique=True))
        role["portList"] = [
            {
                "label": lab,
                "beginAt": draw(st.sampled_from([0, draw(st.integers(0, 65535))])),
                "portNumber": draw(st.integers(1, 16)),
            }
            for lab in labels
        ]
    for key in ("minFailedTaskCount", "minSucceededTaskCount"):
        if draw(st.booleans()):
            role[key] = draw(st.one_of(st.none(), st.integers(1, tasks)))
    return role


@st.composite
def v1_docs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid v1 job that v2 can also express (v2's name and role-name patterns are the stricter ones)."""
    names = draw(st.lists(V2_ROLE_NAMES, min_size=1, max_size=3, unique=True))
    doc: dict[str, Any] = {
        "jobName": draw(V2_JOB_NAMES),
        "image": draw(TEXT.filter(str.strip)),
        "taskRoles": [draw(v1_roles(n)) for n in names],
    }
    for key in ("authFile", "dataDir", "outputDir", "codeDir", "gpuType", "virtualCluster"):
        if draw(st.booleans()):
            doc[key] = draw(TEXT)
    if draw(st.booleans()):
        doc["retryCount"] = draw(st.integers(0, 10))
    if draw(st.booleans()):
        envs = draw(st.dictionaries(ENV_KEYS, SCALARS, max_size=4))
        if draw(st.booleans()):
            envs["isDebug"] = draw(st.booleans())
        doc["jobEnvs"] = envs
    if draw(st.booleans()):
        doc["extras"] = draw(st.dictionaries(EXTRAS_KEYS, JSONISH, max_size=3))
    return doc


@st.composite
def v2_docs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid v2 job using most of the protocol: several images, data / script / output, deployments, secrets."""
    images = draw(st.lists(st.text("abcdef", min_size=1, max_size=6), min_size=1, max_size=2, unique=True))
    prereqs: list[dict[str, Any]] = [
        {"name": n, "type": "dockerimage", "uri": draw(TEXT.filter(str.strip))} for n in images
    ]
    if draw(st.booleans()):
        prereqs[0]["auth"] = {"username": draw(TEXT), "password": "<% $secrets.pw %>"}
    extra: dict[str, str] = {}
    for kind in ("data", "script", "output"):
        if draw(st.booleans()):
            extra[kind] = f"{kind}1"
            uri = draw(st.lists(TEXT, min_size=1, max_size=2)) if kind == "data" else draw(TEXT)
            prereqs.append({"name": f"{kind}1", "type": kind, "uri": uri})
    names = draw(st.lists(V2_ROLE_NAMES, min_size=1, max_size=3, unique=True))
    roles: dict[str, Any] = {}
    for name in names:
        n = draw(st.integers(1, 4))
        memory = draw(st.integers(100, 65536))
        role: dict[str, Any] = {
            "instances": n,
            "dockerImage": draw(st.sampled_from(images)),
            "resourcePerInstance": {
                "cpu": draw(st.integers(1, 32)),
                "memoryMB": memory,
                "gpu": draw(st.integers(0, 4)),
            },
            "commands": draw(st.lists(COMMANDS, min_size=1, max_size=3)),
        }
        if draw(st.booleans()):
            role["resourcePerInstance"]["ports"] = draw(
                st.dictionaries(LABELS, st.integers(1, 8), min_size=1, max_size=3)
            )
        if draw(st.booleans()):
            role["completion"] = {
                "minFailedInstances": draw(st.one_of(st.none(), st.integers(-1, n))),
                "minSucceededInstances": draw(st.one_of(st.none(), st.integers(-1, n))),
            }
        if draw(st.booleans()):
            role["taskRetryCount"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            role["extraContainerOptions"] = {"shmMB": draw(st.integers(0, memory))}
            if draw(st.booleans()):
                role["extraContainerOptions"]["infiniband"] = draw(st.booleans())
        for kind, ref in extra.items():
            if draw(st.booleans()):
                role[kind] = ref
        roles[name] = role
    doc = v2_doc(roles, name=draw(V2_JOB_NAMES), prerequisites=prereqs)
    if draw(st.booleans()):
        doc["parameters"] = draw(st.dictionaries(TEXT, SCALARS, max_size=3))
    if draw(st.booleans()):
        doc["secrets"] = draw(st.dictionaries(TEXT, TEXT, max_size=2))
    if draw(st.booleans()):
        doc["jobRetryCount"] = draw(st.integers(0, 5))
    if draw(st.booleans()):
        doc["version"] = draw(st.one_of(TEXT, st.integers(0, 10)))
    if draw(st.booleans()):
        commands = st.lists(TEXT, min_size=1, max_size=2)  # OpenPAI: each list, when given, holds a command
        dep_roles = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        dep = {
            "name": "dep",
            "taskRoles": {
                n: {k: draw(commands) for k in ("preCommands", "postCommands") if draw(st.booleans())}
                for n in dep_roles
            },
        }
        doc["deployments"] = [dep]
        if draw(st.booleans()):
            doc["defaults"] = {"deployment": "dep"}
    if draw(st.booleans()):
        doc.setdefault("defaults", {})["virtualCluster"] = draw(TEXT)
    if draw(st.booleans()):
        plugins = draw(st.lists(st.sampled_from(["ssh", "tensorboard", "jupyter"]), unique=True, max_size=3))
        doc["extras"] = {
            "com.microsoft.pai.runtimeplugin": [{"plugin": p, "parameters": {}} for p in plugins],
            "gangAllocation": draw(st.booleans()),
        }
    return doc
