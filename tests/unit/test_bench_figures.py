"""The bench's table: a figure over several runs is judged on the medians it shows (tests/bench/common.py)."""

from __future__ import annotations

from tests.bench.common import Figure, combined, ratio


def run(value: float, baseline: float, rule_slack: float = 1.0) -> Figure:
    fig = Figure("PX", "a figure", "s", f"<= baseline + {rule_slack:g} s")
    fig.value, fig.baseline = value, baseline
    fig.ratio = ratio(value, baseline)
    fig.judge(lambda f: f.value is not None and f.baseline is not None and f.value <= f.baseline + rule_slack)
    return fig


def test_the_flag_is_the_rule_on_the_medians_shown_not_a_vote_of_the_runs() -> None:
    runs = [run(5.0, 4.5), run(6.0, 4.0), run(7.0, 6.5)]  # met, missed, met: a vote says met
    assert [f.met for f in runs] == [True, False, True]
    fig = combined(runs)
    assert (fig.value, fig.baseline) == (6.0, 4.5)
    assert fig.met is False  # 6.0 s is not within 4.5 s + 1 s, as the row shows


def test_a_ratio_target_is_judged_on_the_median_ratio() -> None:
    def by_ratio(value: float, baseline: float) -> Figure:
        fig = Figure("PY", "relative", "s", "<= 1.2x")
        fig.value, fig.baseline, fig.ratio = value, baseline, ratio(value, baseline)
        fig.judge(lambda f: f.ratio is not None and f.ratio <= 1.2)
        return fig

    fig = combined([by_ratio(1.21, 1.0), by_ratio(2.36, 2.0), by_ratio(1.1, 1.0)])  # 1.21x, 1.18x, 1.10x
    assert fig.ratio is not None and round(fig.ratio, 2) == 1.18
    assert fig.met is True


def test_a_figure_without_a_rule_keeps_the_runs_verdicts() -> None:
    a, b = Figure("PZ", "t", "s", "t", value=1.0, met=True), Figure("PZ", "t", "s", "t", value=2.0, met=True)
    assert combined([a, b]).met is True
