"""GPU utilisation and memory through NVML (nvidia-ml-py). Without a driver it says so, once, and returns
nothing: CPU-only charts are the rest of the product's answer."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class GpuSample:
    index: int
    utilization_percent: float
    memory_used_bytes: int
    memory_total_bytes: int


class Nvml:
    """Lazily initialised NVML; ``available`` is False (with ``message``) when there is no GPU driver."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: bool | None = None
        self.message: str | None = None

    @property
    def available(self) -> bool:
        with self._lock:
            if self._ready is None:
                try:
                    import pynvml

                    pynvml.nvmlInit()
                    self._ready = True
                except Exception as exc:  # NVMLError_LibraryNotFound (no driver) and friends
                    self._ready = False
                    self.message = f"NVML not available ({exc}); GPU metrics are off, CPU and memory still work"
            return self._ready

    def sample(self, indices: list[int] | None = None) -> dict[int, GpuSample]:
        if not self.available:
            return {}
        import pynvml

        out = {}
        count = pynvml.nvmlDeviceGetCount()
        for i in indices if indices is not None else range(count):
            if not 0 <= i < count:
                continue
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            util = pynvml.nvmlDeviceGetUtilizationRates(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            out[i] = GpuSample(i, float(util.gpu), int(mem.used), int(mem.total))
        return out
