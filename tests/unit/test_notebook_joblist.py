"""JobList logic: rows from a source, refresh in place, state filters, auto-refresh, escaping, service links."""

from __future__ import annotations

import threading
from typing import Any

from pai_jupyter.client import JobDetail, JobSummary, TaskService
from pai_jupyter.notebook.display import LIST_COLUMNS
from pai_jupyter.notebook.joblist import JobList
from tests.polling import wait_for

EVIL = "<script>x</script>"


def job(name: str, state: str, **kw: Any) -> JobSummary:
    return JobSummary.model_validate({"name": name, "username": "ann", "state": state, **kw})


class Source:
    """Returns whatever ``jobs`` holds now; counts calls (the auto-refresh test waits on them)."""

    def __init__(self, jobs: list[JobSummary]):
        self.jobs, self.calls, self.fail = jobs, 0, False
        self.called = threading.Event()

    def __call__(self) -> list[JobSummary]:
        self.calls += 1
        self.called.set()
        if self.fail:
            raise ConnectionError("daemon gone")
        return list(self.jobs)


def cells(jl: JobList) -> list[list[str]]:
    return [[c.value for c in row.cells] for row in jl.rows.values()]


def test_rows_have_the_seed_columns_and_escape_everything() -> None:
    src = Source([job(EVIL, "RUNNING", totalGpuNumber=2, virtualCluster="<vc>"), job("b", "FAILED", appExitCode=3)])
    jl = JobList(source=src, interval=0)
    assert [h.value for h in jl.header[:9]] == [f"<b>{c}</b>" for c in LIST_COLUMNS[:9]]
    assert len(jl.grid.children) == (len(LIST_COLUMNS) + 1) * 3
    first = cells(jl)[0]
    assert first[0] == "&lt;script&gt;x&lt;/script&gt;" and first[4] == "&lt;vc&gt;" and first[7] == "2"
    assert "RUNNING" in first[8] and cells(jl)[1][9] == "3"
    assert all("<script>" not in v for row in cells(jl) for v in row)
    assert jl.status.value == "2 jobs"
    jl.close()


def test_refresh_updates_rows_in_place_and_closes_gone_ones() -> None:
    src = Source([job("a", "WAITING"), job("b", "RUNNING")])
    jl = JobList(source=src, interval=0)
    row_a, row_b = jl.rows["ann~a"], jl.rows["ann~b"]
    src.jobs = [job("a", "RUNNING")]
    jl.refresh()
    assert jl.rows["ann~a"] is row_a and "RUNNING" in row_a.cells[8].value
    assert "ann~b" not in jl.rows and row_b.action.comm is None  # closed
    src.fail = True
    jl.refresh()
    assert "could not refresh: daemon gone" in jl.status.value and list(jl.rows) == ["ann~a"]
    jl.close()


def test_state_filters_pick_rows() -> None:
    src = Source([job("a", "RUNNING"), job("b", "FAILED"), job("c", "SUCCEEDED")])
    jl = JobList(source=src, interval=0)
    jl.filters["FAILED"].value = True
    assert list(jl.rows) == ["ann~b"]
    jl.filters["SUCCEEDED"].value = True
    assert list(jl.rows) == ["ann~b", "ann~c"]
    jl.filters["FAILED"].value = jl.filters["SUCCEEDED"].value = False
    assert len(jl.rows) == 3
    jl.close()


def test_auto_refresh_runs_until_closed() -> None:
    src = Source([job("a", "RUNNING")])
    jl = JobList(source=src, interval=0.05)
    wait_for(lambda: src.calls >= 4, 5, "four refreshes")
    assert src.calls >= 4
    refresher = jl._thread
    assert refresher is not None
    jl.auto.value = 0.0  # off
    wait_for(lambda: not refresher.is_alive(), 5, "the refresh thread to end")
    assert jl._thread is refresher  # and no other one started: nothing calls the source any more
    jl.close()


class Client:
    """The two calls the link action makes."""

    def __init__(self, services: list[dict[str, Any]]):
        self._services = services

    def services(self, job_id: str) -> list[TaskService]:
        return [TaskService.model_validate(s) for s in self._services]

    def detail(self, job_id: str) -> JobDetail:
        return JobDetail.from_api(
            {
                "name": "a",
                "jobStatus": {"username": "ann", "state": "RUNNING"},
                "taskRoles": {
                    "w": {
                        "taskStatuses": [
                            {"taskIndex": 0, "taskState": "RUNNING"},
                            {"taskIndex": 1, "taskState": "WAITING"},
                        ]
                    }
                },
            }
        )


def test_service_actions_link_to_the_server_extension_routes() -> None:
    client = Client([{"role": "w", "index": 1, "name": "tensorboard", "host": "h", "port": 1, "state": "running"}])
    jl = JobList(client, source=Source([job("a", "RUNNING")]), interval=0, base="/user/ann/")
    jl.act("TensorBoard", "ann~a")
    assert 'href="/user/ann/pai/jobs/ann~a/w/1/tensorboard/"' in jl.panel.children[0].value
    jl.rows["ann~a"].action.value = "Jupyter"  # the row's menu runs the action, then resets
    assert "runs no jupyter" in jl.panel.children[0].value and jl.rows["ann~a"].action.value == "actions…"
    jl.act("terminal", "ann~a")  # every running task
    links = jl.panel.children[0].value
    assert links.count("/terminal/") == 1 and 'href="/user/ann/pai/jobs/ann~a/w/0/terminal/"' in links  # the page
    assert "websocket" not in links
    jl.close()
