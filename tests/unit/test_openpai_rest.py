"""Our answers against OpenPAI's own as oracles (tests/helpers/openpai_rest_oracle.py): the job list's filters and
order on the real store, the rendering of commands, and the exit spec table."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pai_jupyter.cluster.core.store import Store
from pai_jupyter.cluster.http import views
from pai_jupyter.protocol import render_commands
from pai_jupyter.protocol.render import render
from tests.helpers.jobdocs import v2_doc, v2_role
from tests.helpers.openpai_rest_oracle import (
    DATA,
    exit_spec_table,
    openpai_barrier_seconds,
    openpai_exit_spec,
    openpai_list,
    openpai_render,
)
from tests.properties import examples

# ---- the job list -------------------------------------------------------------------------------------------------
WORDS = ["a", "b", "c"]
job_st = st.fixed_dictionaries(
    {
        "username": st.sampled_from(["alice", "bob"]),
        "virtualCluster": st.sampled_from(["default", "vc1"]),
        "state": st.sampled_from(["WAITING", "RUNNING", "SUCCEEDED", "FAILED"]),
        "tags": st.lists(st.sampled_from(["t1", "t2", "t3"]), unique=True, max_size=2),
        "jobPriority": st.sampled_from([None, None, "crit", "prod", "test", "oppo"]),
        "submissionTime": st.integers(1, 4),
        "retries": st.integers(0, 2),
        "totalGpuNumber": st.integers(0, 2),
        "completedTime": st.one_of(st.none(), st.integers(10, 12)),
    }
)
FIELDS = ["jobName", "submissionTime", "username", "vc", "retries", "totalGpuNumber", "state", "completionTime"]
query_st = st.dictionaries(
    st.sampled_from(["username", "vc", "state", "tagsContain", "tagsNotContain", "jobPriority", "keyword", "order"]),
    st.text(alphabet="x", max_size=0),  # replaced below, per key
    max_size=4,
)


@st.composite
def queries(draw: st.DrawFn) -> dict[str, str]:
    keys = draw(query_st)
    pools = {
        "username": ["alice", "bob", "carol"],
        "vc": ["default", "vc1"],
        "state": ["WAITING", "RUNNING", "SUCCEEDED", "FAILED"],
        "tagsContain": ["t1", "t2", "t3"],
        "tagsNotContain": ["t1", "t2", "t3"],
        "jobPriority": ["default", "crit", "prod", "test", "oppo"],
    }
    out = {}
    for key in keys:
        if key == "keyword":
            out[key] = draw(st.sampled_from(["a", "job1", "vc", "ob"]))
        elif key == "order":
            field = draw(st.sampled_from([*FIELDS, "jobPriority", "nope", "totalTaskNumber"]))
            out[key] = f"{field},{draw(st.sampled_from(['ASC', 'DESC', 'asc', '']))}".rstrip(",")
        else:
            out[key] = ",".join(draw(st.lists(st.sampled_from(pools[key]), min_size=1, max_size=2, unique=True)))
    return out


def _seed(store: Store, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items = []
    for i, j in enumerate(jobs):
        name = f"job{i}"
        with store.tx():
            job_id = store.insert_job(
                j["username"],
                name,
                vc=j["virtualCluster"],
                now=j["submissionTime"],
                total_gpu=j["totalGpuNumber"],
                total_tasks=1,
                total_roles=1,
                config_format="v2",
                config_text="",
                model="{}",
            )
            store.update_job(job_id, state=j["state"], retries=j["retries"], completed_time=j["completedTime"])
            for tag in j["tags"]:
                store.add_tag(job_id, tag)
            if j["jobPriority"] is not None:
                store.set_priority(job_id, j["jobPriority"], None)
        items.append({**j, "name": name, "totalTaskNumber": 1})
    return items


def _ours(store: Store, query: dict[str, str]) -> list[dict[str, Any]]:
    """What the Jobs handler passes the store for ``query`` (its ``listed`` splits on commas)."""

    def listed(name: str) -> list[str] | None:
        return [v for v in query.get(name, "").split(",") if v] or None

    text, _ = store.list_json(
        users=listed("username"),
        states=listed("state"),
        vcs=listed("vc"),
        keyword=query.get("keyword"),
        tags_contain=listed("tagsContain"),
        tags_not_contain=listed("tagsNotContain"),
        priorities=listed("jobPriority"),
        order=query.get("order", "submissionTime,DESC"),
    )
    return list(json.loads(text))


@settings(max_examples=examples(150), deadline=None)
@given(jobs=st.lists(job_st, min_size=1, max_size=7), query=queries())
def test_the_job_list_filters_and_orders_as_openpai(jobs: list[dict[str, Any]], query: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "state.db")
        try:
            items = _seed(store, jobs)
            ours = _ours(store, query)
        finally:
            store.close()
    assert [j["name"] for j in ours] == [j["name"] for j in openpai_list(items, query)], query
    by_name = {j["name"]: j for j in items}
    for j in ours:  # the item carries the tags and the priority class ("default" for none, as OpenPAI shows)
        assert sorted(j["tags"]) == sorted(by_name[j["name"]]["tags"])
        assert j["jobPriority"] == (by_name[j["name"]]["jobPriority"] or "default")


def test_the_issues_examples_tags_contain_and_an_unknown_order(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    base = {"username": "u", "virtualCluster": "default", "state": "SUCCEEDED", "jobPriority": None}
    more = {"retries": 0, "totalGpuNumber": 0, "completedTime": None}
    _seed(store, [{**base, **more, "tags": ["t1"] if i == 3 else [], "submissionTime": i} for i in range(6)])
    assert [j["name"] for j in _ours(store, {"tagsContain": "t1"})] == ["job3"]
    assert [j["name"] for j in _ours(store, {"order": "bogus,ASC"})] == [f"job{i}" for i in range(5, -1, -1)]
    assert next(j["name"] for j in _ours(store, {"order": "jobName,asc"})) == "job5"  # ASC or DESC, exactly
    store.close()


# ---- rendering ----------------------------------------------------------------------------------------------------
value_st = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet="abc xyz-_/", max_size=6),
    st.lists(st.one_of(st.integers(0, 9), st.text(alphabet="ab", max_size=2), st.none()), max_size=3),
    st.dictionaries(st.sampled_from(["k"]), st.integers(0, 3), max_size=1),
)
NAMES = ["$parameters.p", "$parameters.q", "$parameters.p[0]", "$parameters.list[1]", "$secrets.s", "$other.x", "foo"]


@st.composite
def commands(draw: st.DrawFn) -> list[str]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        parts = draw(st.lists(st.one_of(st.sampled_from(["echo ", " a ", "-"]), st.sampled_from(NAMES)), max_size=4))
        gap = draw(st.sampled_from(["", " ", "  "]))
        out.append("".join(f"<%{gap}{p}{gap}%>" if p in NAMES else p for p in parts) or "true")
    return out


@settings(max_examples=examples(300), deadline=None)
@given(
    cmds=commands(),
    params=st.dictionaries(st.sampled_from(["p", "q", "list"]), value_st, max_size=3),
    secrets=st.one_of(st.just({}), st.fixed_dictionaries({"s": st.text(alphabet="xyz12", min_size=1, max_size=4)})),
)
def test_commands_render_as_openpai_renders_them(
    cmds: list[str], params: dict[str, Any], secrets: dict[str, Any]
) -> None:
    from pai_jupyter.protocol import job_from_document

    doc = v2_doc({"worker": v2_role(commands=cmds)}, parameters=params)
    if secrets:
        doc["secrets"] = secrets
    job = job_from_document(yaml.safe_load(yaml.safe_dump(doc)))  # as it travels: YAML
    ours = render_commands(job, job.task_roles[0])

    def lines(text: str) -> list[str]:
        return [line.strip() for line in text.splitlines() if line.strip()]

    assert lines(ours) == lines(openpai_render(cmds, job.parameters, job.secrets or None))


def test_the_issues_examples_a_list_parameter_and_an_unknown_name_with_secrets() -> None:
    from pai_jupyter.protocol import job_from_document

    doc = v2_doc(
        {"worker": v2_role(commands=["echo <% $parameters.hosts %>", "echo [<% $parameters.unknown %>]"])},
        parameters={"hosts": ["a", "b"]},
    )
    plain = job_from_document(doc)
    assert render_commands(plain, plain.task_roles[0]) == "echo a,b\necho [<% $parameters.unknown %>]"
    secret = job_from_document({**doc, "secrets": {"k": "v"}})
    assert render_commands(secret, secret.task_roles[0]) == "echo a,b\necho []"
    assert render("<% $parameters.x %>", {"parameters": {"x": 1e-7}}) == "1e-7"  # JavaScript's numbers
    for value, js in (
        (1e-7, "1e-7"),
        (6.103515625e-05, "0.00006103515625"),
        (1.5e21, "1.5e+21"),
        (47179393412970256.0, "47179393412970260"),
        (2**60, "1152921504606847000"),
    ):  # ours and the oracle's
        assert render("<% $parameters.x %>", {"parameters": {"x": value}}) == js
        assert openpai_render(["echo <% $parameters.x %>"], {"x": value}, None) == f"echo {js}"


# ---- exit specs ---------------------------------------------------------------------------------------------------
def test_the_packaged_exit_spec_table_is_openpais() -> None:
    assert views.EXIT_SPEC_FILE.read_bytes() == (DATA / "k8s-job-exit-spec.yaml").read_bytes()


def test_exit_specs_are_openpais_entries() -> None:
    table = exit_spec_table()
    for code, entry in table.items():
        if code in views.LOCAL_EXIT_SPECS or code == 127:
            continue
        assert views.exit_spec(code, None) == entry
    # a user command's exit that OpenPAI's runtime names no pattern for is its 255, PAIRuntimeUnknownFailed
    for code in (1, 2, 3, 42, 129, 200):
        spec = views.exit_spec(code, None)
        assert spec == {**table[255], "code": code}
        assert (spec["phrase"], spec["reaction"], spec["type"]) == (
            "PAIRuntimeUnknownFailed",
            "RETRY_TO_MAX",
            "UNKNOWN_FAILURE",
        )
    assert views.exit_spec(127, None)["phrase"] == table[220]["phrase"] == "UserCommandExitWithError"
    for code in (300, 1000, -5, -9999):  # the fallbacks of each sign
        assert views.exit_spec(code, None) == openpai_exit_spec(code)
    assert (
        views.exit_spec(137, "out of memory: the task used more than its 256 MB")["phrase"] == (table[-1200]["phrase"])
    )
    assert views.exit_spec(None, None) is None
    # what every spec carries has the table's enums
    schema = {f["field"]: f for f in yaml.safe_load((DATA / "k8s-job-exit-spec.yaml").read_text())["schema"]}
    for code in (*views.LOCAL_EXIT_SPECS, 3, 0, -1200):
        spec = views.exit_spec(code, None)
        assert spec is not None
        for field in ("type", "reaction"):
            assert spec[field] in schema[field]["range"], (code, field)
    assert (views.exit_type(0), views.exit_type(3), views.exit_type(None)) == ("Succeeded", "Failed", None)


# ---- the ssh barrier ----------------------------------------------------------------------------------------------
def test_the_ssh_barrier_waits_as_long_as_openpais() -> None:
    import re

    from pai_jupyter.cluster.task import sshd

    for timeout in (None, 2, 45):
        params = {"sshbarrier": True, **({"sshbarrierTimeout": timeout} if timeout is not None else {})}
        script = sshd.barrier({"parameters": params, "jobKey": "/k"})
        seconds = int(re.search(r"\+ (\d+) \)\)", script).group(1))  # type: ignore[union-attr]
        assert seconds == openpai_barrier_seconds(timeout), timeout
