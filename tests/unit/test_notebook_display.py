"""Display helpers (escaping, the status line), cell interpolation, --param values and the held interrupt."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from pai_jupyter.client import JobDetail, JobSummary
from pai_jupyter.notebook import display as ui
from pai_jupyter.notebook.cellinput import CellInputError, deferred_interrupt, interpolate, parse_params

EVIL = '<script>alert("x")</script>'


def detail(state: str = "WAITING", **status: object) -> JobDetail:
    return JobDetail.from_api(
        {
            "name": "j",
            "jobStatus": {"username": "alice", "state": state, **status},
            "taskRoles": {
                "main": {"taskStatuses": [{"taskIndex": 0, "taskState": state, "containerExitDiagnostics": EVIL}]}
            },
        }
    )


def test_status_line_text_and_html_escape_what_the_server_says() -> None:
    d = detail("WAITING", waitingReason=EVIL)
    assert ui.status_text(d, 3.4) == f"alice~j: WAITING ({EVIL}) · 3 s"
    html = ui.status_html(d, 75)
    assert "<script>" not in html and "&lt;script&gt;" in html and "1m15s" in html
    d = detail("FAILED", appExitCode=137, appExitDiagnostics=EVIL)
    assert ui.status_text(d) == "alice~j: FAILED, exit code 137"
    assert "<script>" not in ui.status_html(d) and "exit code <b>137</b>" in ui.status_html(d)
    assert "<script>" not in ui.detail_html(d) and "&lt;script&gt;" in ui.detail_html(d)


def test_problems_tables_links_and_routes_are_escaped() -> None:
    probs = [{"path": "taskRoles[0].command", "message": EVIL}, {"path": "", "message": "whole <doc>"}]
    assert ui.problems_text(probs) == f"invalid job (2 problems)\n  - taskRoles[0].command: {EVIL}\n  - whole <doc>"
    assert "<script>" not in ui.problems_html(probs) and "<doc>" not in ui.problems_html(probs)
    assert "<script>" not in ui.table_html(["a<b>"], [[EVIL]]) and "a&lt;b&gt;" in ui.table_html(["a<b>"], [[1]])
    assert ui.link_html('x" onclick="y', EVIL) == (
        '<a href="x&quot; onclick=&quot;y" target="_blank" '
        'rel="noopener">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</a>'
    )
    url = ui.service_url("a b~n/x", "r?1", 2, "tensorboard", "/hub/")
    assert url == "/hub/pai/jobs/a%20b~n%2Fx/r%3F1/2/tensorboard/"
    assert "<script>" not in ui.pre_html(EVIL) and "<script>" not in ui.download_html(EVIL, "x", "text/plain", EVIL)


def test_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAI_JUPYTER_BASE_URL", raising=False)
    monkeypatch.delenv("JUPYTERHUB_SERVICE_PREFIX", raising=False)
    assert ui.base_url() == "/"
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/ann")
    assert ui.base_url() == "/user/ann/"
    monkeypatch.setenv("PAI_JUPYTER_BASE_URL", "/lab/")
    assert ui.service_url("a~b", "main", 0, "jupyter") == "/lab/pai/jobs/a~b/main/0/jupyter/"


def test_jobs_frame_has_the_seed_columns_and_escapes_in_html() -> None:
    jobs = [
        JobSummary.model_validate(
            {
                "name": EVIL,
                "username": "u",
                "state": "RUNNING",
                "totalGpuNumber": 2,
                "totalTaskNumber": 3,
                "virtualCluster": "vc1",
                "submissionTime": 1.7e12,
                "launchedTime": 1.7e12,
                "completedTime": 1.7e12 + 61_000,
            }
        )
    ]
    frame = ui.jobs_frame(jobs)
    assert list(frame.columns) == list(ui.LIST_COLUMNS) and frame.index[0] == f"u~{EVIL}"
    assert frame.iloc[0]["duration"] == "1m01s" and frame.iloc[0]["GPUs"] == 2
    assert "<script>" not in frame._repr_html_()


def test_status_line_is_one_output_updated_in_place_only_on_change() -> None:
    InteractiveShell.instance()
    line = ui.StatusLine()
    with capture_output() as c:
        line.job(detail("WAITING"), 0.1)
        line.job(detail("WAITING"), 0.4)  # same text (whole seconds): nothing sent
        line.job(detail("RUNNING"), 1.2)
    assert [o.update for o in c.outputs] == [False, True]
    ids = {o.transient["display_id"] for o in c.outputs}
    assert len(ids) == 1 and c.outputs[-1].data["text/plain"] == "alice~j: RUNNING · 1 s"


def test_interpolation_fills_names_and_leaves_json_yaml_and_shell_alone() -> None:
    ns = {"lr": 0.1, "name": "exp", "flag": True, "nothing": None, "cfg": SimpleNamespace(epochs=3)}
    text = '{"jobName": "{name}", "taskRoles": [{"command": "run --lr {lr} --e {cfg.epochs} ${HOME} {{name}}"}]}'
    assert interpolate(text, ns) == (
        '{"jobName": "exp", "taskRoles": [{"command": "run --lr 0.1 --e 3 ${HOME} {name}"}]}'
    )
    assert interpolate("a: {flag}\nb: {nothing}\nc: {x: 1}\n", ns) == "a: true\nb: null\nc: {x: 1}\n"
    with pytest.raises(CellInputError, match=r"'missing' is not defined.*\{\{missing\}\}"):
        interpolate("echo {missing}", ns)
    with pytest.raises(CellInputError, match="has no attribute 'nope'"):
        interpolate("{cfg.nope}", ns)


def test_params_keep_their_types() -> None:
    assert parse_params(["lr=0.1", "n=3", "ok=true", "s=hello world", "e="]) == {
        "lr": 0.1,
        "n": 3,
        "ok": True,
        "s": "hello world",
        "e": "",
    }
    with pytest.raises(CellInputError, match="KEY=VALUE"):
        parse_params(["novalue"])


def test_an_interrupt_during_the_block_is_held_and_reported() -> None:
    before = signal.getsignal(signal.SIGINT)
    with deferred_interrupt() as held:
        os.kill(os.getpid(), signal.SIGINT)  # Python runs the handler before os.kill returns: without the
        # hold, KeyboardInterrupt would be raised here
        finished = True
    assert finished and held["hit"] is True
    assert signal.getsignal(signal.SIGINT) is before
    with deferred_interrupt() as held:
        pass
    assert held["hit"] is False


def test_the_submitted_line_links_to_the_portal_of_a_remote_openpai() -> None:
    from pai_jupyter.client import Profile

    remote = SimpleNamespace(profile=Profile(name="prod", url="https://pai.example.com/"))
    html = ui.submitted_html("ann~exp<1>", remote)
    assert 'href="https://pai.example.com/job-detail.html?username=ann&amp;jobName=exp%3C1%3E"' in html
    assert "<code>ann~exp&lt;1&gt;</code>" in html and "%pai_stop ann~exp&lt;1&gt;" in html
    local = SimpleNamespace(profile=Profile(name="local"))
    assert "portal" not in ui.submitted_html("ann~x", local)
    assert ui.submitted_text("ann~x").startswith("submitted ann~x  (%pai_status ann~x")
