"""The sweep's pieces without a daemon: the search space and its grid and random draws (Hypothesis), the
searches rebuilt from stored trials (what a re-attached driver does), a trial's job, ``report`` and the reports
file, and the results table's rows (sorted, escaped)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pai_jupyter.common import reports as rep
from pai_jupyter.protocol import Job, TaskRole
from pai_jupyter.protocol.rules import ESTIMATOR_KEY
from pai_jupyter.sweep import report, trial_job
from pai_jupyter.sweep.search import GridSearch, OptunaSearch, RandomSearch
from pai_jupyter.sweep.space import (
    Choice,
    RandInt,
    Uniform,
    check_space,
    choice,
    grid,
    grid_size,
    loguniform,
    randint,
    sample,
    space_from_dict,
    space_to_dict,
    uniform,
)

finite = st.floats(-1e6, 1e6, allow_nan=False)


@st.composite
def params(draw: Any) -> Any:
    kind = draw(st.sampled_from(["choice", "uniform", "loguniform", "randint"]))
    if kind == "choice":
        return choice(draw(st.lists(st.integers() | st.text(max_size=5), min_size=1, max_size=4, unique=True)))
    if kind == "randint":
        lo = draw(st.integers(-100, 100))
        return randint(lo, lo + draw(st.integers(0, 50)))
    if kind == "loguniform":
        lo = draw(st.floats(1e-6, 1e3))
        return loguniform(lo, lo * draw(st.floats(1, 1e3)))
    lo = draw(finite)
    return uniform(lo, lo + draw(st.floats(0, 1e6)))


spaces = st.dictionaries(st.sampled_from(["a", "b", "c", "lr"]), params(), min_size=1, max_size=3)


def inside(p: Any, v: Any) -> bool:
    if isinstance(p, Choice):
        return v in p.values
    if isinstance(p, RandInt):
        return isinstance(v, int) and p.low <= v <= p.high
    return p.low <= v <= p.high


@given(spaces, st.integers(1, 4))
def test_the_grid_is_every_combination_once_each_value_in_range(space: Any, points: int) -> None:
    combos = list(grid(space, points))
    assert len(combos) == grid_size(space, points)
    assert len({json.dumps(c, sort_keys=True) for c in combos}) == len(combos)
    assert all(inside(space[k], v) for c in combos for k, v in c.items())
    for name, p in space.items():
        if isinstance(p, (Choice, RandInt)) or p.low == p.high:
            continue
        assert {c[name] for c in combos} >= ({p.low, p.high} if points > 1 else set())  # the ends are on the grid


@given(spaces, st.integers(0, 2**32))
def test_a_random_draw_is_in_range_and_repeats_for_the_same_seed(space: Any, seed: int) -> None:
    drawn = sample(space, random.Random(seed))
    assert all(inside(space[k], v) for k, v in drawn.items())
    assert sample(space, random.Random(seed)) == drawn


@given(spaces)
def test_a_space_survives_its_stored_form(space: Any) -> None:
    assert space_from_dict(json.loads(json.dumps(space_to_dict(space)))) == space


def test_the_first_parameter_changes_slowest_and_the_log_grid_is_geometric() -> None:
    combos = list(grid({"a": choice(1, 2), "lr": loguniform(1e-4, 1e-2)}, 3))
    assert [c["a"] for c in combos] == [1, 1, 1, 2, 2, 2]
    assert [round(math.log10(c["lr"]), 9) for c in combos[:3]] == [-4, -3, -2]
    assert list(grid({"n": randint(1, 3)}, 10)) == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_bad_spaces_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        uniform(2, 1)
    with pytest.raises(ValueError, match="0 < low"):
        loguniform(0, 1)
    with pytest.raises(ValueError, match="identifier"):
        check_space({"not a name": [1]})
    with pytest.raises(ValueError, match="empty"):
        check_space({})
    assert check_space({"x": [1, 2]}) == {"x": Choice((1, 2))}
    assert isinstance(check_space({"x": uniform(0, 1)})["x"], Uniform)


def test_grid_and_random_searches_pick_by_trial_number_so_a_new_driver_continues() -> None:
    space = check_space({"x": uniform(0, 1), "k": [1, 2]})
    g = GridSearch(space, 2)
    assert [g.ask(n) for n in range(5)] == [{"x": 0.0, "k": 1}, {"x": 0.0, "k": 2}, {"x": 1.0, "k": 1},
                                            {"x": 1.0, "k": 2}, None]  # fmt: skip
    first, again = RandomSearch(space, 7), RandomSearch(space, 7)
    assert [first.ask(n) for n in range(4)] == [again.ask(n) for n in range(4)]
    assert RandomSearch(space, 8).ask(0) != first.ask(0)


def test_optuna_resumes_from_the_stored_trials_and_prunes_a_trial_behind_the_median() -> None:
    space = check_space({"x": uniform(0, 1)})
    stored = [
        {"number": n, "params": {"x": n / 10}, "state": "SUCCEEDED", "value": (n / 10 - 0.3) ** 2,
         "intermediate": {"0": 1.0, "1": 0.5}}
        for n in range(10)
    ]  # fmt: skip
    search = OptunaSearch(space, "min", seed=0, trials=stored)
    assert len(search.study.trials) == 10 and search.study.best_params == {"x": 0.3}
    params = search.ask(10)
    assert 0 <= params["x"] <= 1
    assert search.intermediate(10, 0, 50.0) is False  # step 0: the warm-up step is never pruned
    assert search.intermediate(10, 1, 99.0) is True  # its best (50) is far behind the others' median (0.5)
    other = search.ask(11)
    assert search.intermediate(11, 0, 0.1) is False and search.intermediate(11, 1, 0.2) is False  # ahead of them
    search.tell({"number": 11, "params": other, "state": "SUCCEEDED", "value": 0.2, "intermediate": {}})
    search.tell({"number": 10, "params": params, "state": "PRUNED", "value": None, "intermediate": {}})
    assert [t.state.name for t in search.study.trials[10:]] == ["PRUNED", "COMPLETE"]
    assert search.intermediate(99, 0, 1.0) is False  # a trial asked by an earlier driver is never pruned here


def test_a_trial_job_is_the_template_renamed_with_its_parameters() -> None:
    template = Job(
        name="t", image="busybox", task_roles=[TaskRole(name="main", command="train --lr <% $parameters.lr %>")]
    ).to_yaml()
    job = Job.from_text(trial_job(template, "s-0003", {"lr": 0.01}))
    assert job.name == "s-0003" and job.parameters == {"lr": 0.01}
    estimator = Job(
        name="e",
        image="busybox",
        task_roles=[TaskRole(name="main", command="x")],
        extras={ESTIMATOR_KEY: {"hyperparameters": {"a": 1}}},
    )
    out = Job.from_text(trial_job(estimator.to_yaml(), "e-0000", {"b": 2}))
    assert out.extras[ESTIMATOR_KEY]["hyperparameters"] == {"a": 1, "b": 2}


def test_report_appends_one_line_to_the_tasks_reports_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run").mkdir()
    monkeypatch.setenv("PAI_TASK_DIR", str(tmp_path))
    report(loss=0.5, step=0)
    report(step=1, loss=0.25, acc=1)
    lines = rep.parse_lines((tmp_path / rep.FILE).read_text() + '{"time": 1, "metrics": {"x": "NaN"}}\n{"trunc')
    assert [(r["step"], r["metrics"]) for r in lines] == [(0, {"loss": 0.5}), (1, {"loss": 0.25, "acc": 1.0})]
    for bad in ({"loss": float("nan")}, {"loss": True}, {}):
        with pytest.raises(ValueError):
            report(**bad)
    with pytest.raises(ValueError, match="step"):
        report(step=-1, loss=1)
    monkeypatch.delenv("PAI_TASK_DIR")
    assert report(loss=1.0)["metrics"] == {"loss": 1.0}  # outside a task: checked, nothing written


def test_the_results_table_sorts_missing_values_last_and_escapes_text() -> None:
    from pai_jupyter.sweep.views import ResultsTable, rows, sort_rows

    class Fake:
        name, status = "s<1>", "running"
        state = {"space": {"opt": {"type": "choice", "values": ["<b>adam</b>", "sgd"]}}, "objective": "loss",
                 "mode": "min", "max_trials": 3}  # fmt: skip
        trials = [
            {"number": 0, "state": "SUCCEEDED", "value": 0.5, "params": {"opt": "<b>adam</b>"}, "metrics": {"a": 1},
             "job": "u~s-0000"},
            {"number": 1, "state": "RUNNING", "value": None, "params": {"opt": "sgd"}, "metrics": {},
             "job": "u~s-0001"},
            {"number": 2, "state": "SUCCEEDED", "value": 0.1, "params": {"opt": "sgd"}, "metrics": {},
             "job": "u~s-0002"},
        ]  # fmt: skip

        def best(self) -> Any:
            return self.trials[2]

    columns, body = rows(Fake())  # type: ignore[arg-type]
    assert columns == ["trial", "state", "loss", "opt", "a", "job"]
    assert [r[0] for r in sort_rows(body, 2, False)] == [2, 0, 1]
    assert [r[0] for r in sort_rows(body, 2, True)] == [0, 2, 1]
    table = ResultsTable(Fake())  # type: ignore[arg-type]
    assert table.sort_by.value == "loss"
    assert "<b>adam" not in table.grid.value and "&lt;b&gt;adam&lt;/b&gt;" in table.grid.value
    assert "s&lt;1&gt;" in table.summary.value and "best 0.1 (trial 2)" in table.summary.value
    table.sort_by.value = "trial"
    table.sweep.trials[1]["metrics"]["lr_now"] = 0.5  # a new metric: a new column, the chosen sort kept
    table.redraw()
    assert table.sort_by.value == "trial" and "<th>lr_now</th>" in table.grid.value


def test_tensorboard_scalars_are_read_from_event_bytes_and_a_partial_tail_is_left(tmp_path: Path) -> None:
    import struct

    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from pai_jupyter.common.tfevents import scalars

    writer = EventFileWriter(str(tmp_path))
    for step in range(3):
        value = Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
        writer.add_event(Event(step=step, wall_time=1000.5, summary=Summary(value=[value])))
    tf2 = TensorProto(dtype=2, tensor_content=struct.pack("<d", 0.125))  # TF2 writes scalars as tensors
    writer.add_event(Event(step=9, wall_time=1001.0, summary=Summary(value=[Summary.Value(tag="acc", tensor=tf2)])))
    writer.close()
    data = next(tmp_path.glob("*tfevents*")).read_bytes()
    found = scalars(data)
    assert [(r["step"], r["metrics"]) for r in found] == [
        (0, {"loss": 1.0}),
        (1, {"loss": 0.5}),
        (2, {"loss": pytest.approx(1 / 3)}),
        (9, {"acc": 0.125}),
    ]
    assert found[0]["time"] == 1000500
    assert scalars(data[:-5]) == found[:-1]  # the last record still being written
    assert scalars(b"\x00" * 7 + b"garbage" * 50) == []
