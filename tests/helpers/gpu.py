"""Fake GPUs for the GPU-idle tests: ``FAKE``, a sampler module the daemon loads instead of NVML, and ``Fake``,
the file of utilisation per GPU it reads, which a test sets."""

from __future__ import annotations

import json
from pathlib import Path

from tests.polling import wait_for

FAKE = '''
import json, os

def sample(indices):
    """Utilisation per GPU index from the file the test writes; one line per call in the counter file."""
    with open(os.environ["PAI_TEST_FAKE_GPUS"] + ".calls", "a") as f:
        f.write("x\\n")
    data = json.loads(open(os.environ["PAI_TEST_FAKE_GPUS"]).read())
    return {i: float(data[str(i)]) for i in indices if str(i) in data}
'''


class Fake:
    def __init__(self, path: Path) -> None:
        self.path = path

    def set(self, **percent: float) -> None:
        """Utilisation by GPU index: ``set(g0=90, g1=1)``."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({k.removeprefix("g"): v for k, v in percent.items()}))
        tmp.replace(self.path)

    def calls(self) -> int:
        calls = Path(str(self.path) + ".calls")
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    def wait_calls(self, more: int) -> None:
        target = self.calls() + more
        wait_for(lambda: self.calls() >= target, 30, f"{more} more samples")
