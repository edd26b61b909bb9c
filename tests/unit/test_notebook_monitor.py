"""ResourceMonitor with a plain data source: per-task series, the no-NVML note, GPUs, window, pause, ends."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pai_jupyter.client import NotSupported
from pai_jupyter.notebook.monitor import MIB, ResourceMonitor
from tests.polling import wait_for

NO_NVML = {"available": False, "message": "NVML not available <libnvidia-ml.so.1>"}


def sample(t: int, tasks: list[dict[str, Any]], gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"time": t, "gpu": gpu or NO_NVML, "tasks": tasks}


def task(index: int, cpu: float | None, mem: int | None, state: str = "RUNNING", gpus: Any = ()) -> dict[str, Any]:
    return {
        "role": "w",
        "index": index,
        "state": state,
        "cpuPercent": cpu,
        "memoryBytes": mem,
        "memoryLimitBytes": 1 << 30,
        "gpus": list(gpus),
    }


class Source:
    def __init__(self, samples: list[dict[str, Any]]):
        self.samples, self.calls = samples, 0

    def __call__(self, job: str) -> dict[str, Any]:
        self.calls += 1
        return self.samples[min(self.calls - 1, len(self.samples) - 1)]


def test_without_nvml_it_says_so_and_plots_cpu_and_memory() -> None:
    m = ResourceMonitor("j", source=Source([]), start=False)
    m.add(sample(1000, [task(0, None, None, "WAITING")]))
    m.add(sample(2000, [task(0, 50.0, 100 * MIB), task(1, 10.0, 20 * MIB)]))
    m.add(sample(3000, [task(0, 150.0, 110 * MIB), task(1, 20.0, 30 * MIB)]))
    assert m.gpu_available is False and m.gpu_box.layout.display == "none"
    assert "No GPU metrics" in m.note.value and "&lt;libnvidia-ml.so.1&gt;" in m.note.value
    assert list(m.cpu.lines.labels) == ["w[0]", "w[1]"]
    y = np.asarray(m.cpu.lines.y)
    assert y.shape == (2, 3) and np.isnan(y[1][0]) and list(y[0][1:]) == [50.0, 150.0]
    assert list(np.asarray(m.memory.lines.y)[0][1:]) == [100.0, 110.0]
    assert len(m.cpu.lines.x) == 3 and not m.gpu.series


def test_with_nvml_gpu_charts_appear() -> None:
    gpu = {"available": True, "message": None}
    g = [{"index": 0, "utilizationPercent": 80, "memoryUsedBytes": 2048 * MIB, "memoryTotalBytes": 16384 * MIB}]
    m = ResourceMonitor("j", source=Source([]), start=False)
    for t in (1, 2):
        m.add(sample(t * 1000, [task(0, 90.0, MIB, gpus=g)], gpu))
    assert m.gpu_available is True and m.gpu_box.layout.display == "" and m.note.value == ""
    assert list(m.gpu.lines.labels) == ["w[0] gpu0"] and list(np.asarray(m.gpu_memory.lines.y)) == [2048.0, 2048.0]


def test_history_is_a_fixed_window() -> None:
    m = ResourceMonitor("j", source=Source([]), window=10, start=False)
    for t in range(50):
        m.add(sample(t, [task(0, float(t), MIB)]))
    assert len(m.times) == 10 and len(m.cpu.series["w[0]"]) == 10 and list(m.cpu.series["w[0]"])[-1] == 49.0


def test_sampling_ends_when_the_job_ends_or_the_server_has_no_metrics() -> None:
    src = Source([sample(1, [task(0, 1.0, MIB)]), sample(2, [task(0, 0.0, MIB, "SUCCEEDED")])])
    m = ResourceMonitor("j", source=src, start=False)
    assert m.poll() is True and m.poll() is False and "ended" in m.status.value

    def remote(job: str) -> dict[str, Any]:
        raise NotSupported("metrics needs the embedded cluster")

    m = ResourceMonitor("j", source=remote, start=False)
    assert m.poll() is False and "not available from this server" in m.note.value


def test_pause_and_rate() -> None:
    src = Source([sample(t, [task(0, 1.0, MIB)]) for t in range(1000)])
    m = ResourceMonitor("j", source=src, interval=0.2, start=False)
    m.interval.value = 0.2
    m.pause.value = True
    assert m.pause.description == "Resume"
    m.start()
    # a bounded wait (a paused loop gives no sign of its turns): 2.5 of its 0.2 s periods, in which a loop that
    # ignored the pause would have polled
    time.sleep(2.5 * m.interval.value)
    assert src.calls == 0
    m.pause.value = False
    wait_for(lambda: src.calls >= 2, 5, "two polls once resumed")
    assert src.calls >= 2
    m.close()
    calls = src.calls
    sampler = m._thread
    assert sampler is not None
    wait_for(lambda: not sampler.is_alive(), 5, "the sampling thread to end")
    assert src.calls <= calls + 1  # at most the poll that was under way


def test_axes_have_headroom_and_few_time_ticks() -> None:
    m = ResourceMonitor("j", source=Source([]), start=False)
    for t, mem in ((1, 40), (2, 52), (3, 52)):
        m.add(sample(t * 1000, [task(0, 99.0, mem * MIB)]))
    assert m.memory.y.max >= 52 * 1.15 and m.memory.y.max == 60  # a round top above the line, not on it
    assert m.cpu.y.max == 120 and m.gpu.y.max > 100
    time_axis = m.cpu.figure.axes[0]
    assert time_axis.tick_format == "%H:%M:%S" and time_axis.num_ticks == 4


def test_after_the_job_ended_the_last_samples_stay_and_are_summed_up() -> None:
    src = Source(
        [
            sample(1000, [task(0, 80.0, 10 * MIB)]),
            sample(2000, [task(0, 95.0, 30 * MIB)]),
            sample(3000, [task(0, None, None, "SUCCEEDED")]),
        ]
    )
    m = ResourceMonitor("j", source=src, start=False)
    assert m.poll() and m.poll() and not m.poll()
    assert m.ended and len(m.cpu.lines.x) == 2 and list(np.asarray(m.cpu.lines.y)) == [80.0, 95.0]
    assert "Resource usage after the job ended" in m.summary.value
    assert ">w[0]</td>" in m.summary.value and "95 %" in m.summary.value and "30.0 MiB" in m.summary.value
    assert m.pause.disabled
    late = ResourceMonitor("j", source=Source([sample(1, [task(0, None, None, "FAILED")])]), start=False)
    assert not late.poll() and "before a sample was taken" in late.summary.value
