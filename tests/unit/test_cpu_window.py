"""CPU % over a window of kept samples: callers close together all read the task's real rate.

Deterministic: the clock and the CPU seconds are given, nothing sleeps."""

from __future__ import annotations

from pai_jupyter.cluster.core.taskops import CPU_WINDOW, CpuWindows

KEY = (1, 0, "main", 0, 0)


def busy(w: CpuWindows, t: float, cores: float = 1.0) -> float | None:
    """A sample of a task that has used ``cores`` CPUs since t=0, taken at ``t``; its rate."""
    w.add(KEY, t, cores * t)
    return w.rate(KEY)


def test_a_call_right_after_another_reads_the_same_rate() -> None:
    """Before: the rate was over the time since the previous call of anyone, 10 ms here: 0 ticks -> 0.0 %."""
    w = CpuWindows()
    assert busy(w, 100.0) is None and w.wait_for(KEY, 100.0) == CPU_WINDOW  # a first caller waits a window
    assert busy(w, 101.0) == 100.0
    assert busy(w, 101.01) == 100.0  # a second widget right after: the window still spans >= 1 s
    assert busy(w, 101.02) == 100.0


def test_a_ticking_cpu_clock_does_not_read_zero() -> None:
    """The kernel's CPU time moves in 10 ms steps: within 10 ms a busy task may show no progress at all."""
    w = CpuWindows()
    ticks = [(0.0, 0.0), (1.0, 1.0), (1.004, 1.0), (1.008, 1.0)]  # the last two: same tick as at t=1.0
    rates = []
    for t, cpu in ticks:
        w.add(KEY, t, cpu)
        rates.append(w.rate(KEY))
    assert rates[1:] == [100.0, 99.6, 99.2]


def test_the_window_slides_and_the_kept_samples_stay_few() -> None:
    w = CpuWindows()
    for i in range(1000):  # ten calls a second for 100 s, a task using half a core
        busy(w, i / 10, cores=0.5)
    assert busy(w, 100.0, cores=0.5) == 50.0
    assert len(w._samples[KEY]) <= 12  # the base a window old, and the calls since


def test_a_drop_in_cpu_time_starts_again_and_forget_drops_ended_tasks() -> None:
    w = CpuWindows()
    busy(w, 0.0)
    busy(w, 2.0)
    w.add(KEY, 2.5, 0.1)  # a child that used most of the time exited and left the tree
    assert w.rate(KEY) is None and w.wait_for(KEY, 2.5) == CPU_WINDOW
    w.forget(set(), (1,))
    assert KEY not in w._samples
