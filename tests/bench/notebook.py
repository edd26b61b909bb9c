"""P7: ``%load_ext pai_jupyter`` in a fresh interpreter with IPython, beside a bare InteractiveShell start.

Each sample is a new ``python -c`` process (nothing cached in sys.modules): it starts an InteractiveShell
(timed: the baseline), then runs ``%load_ext pai_jupyter`` through the shell (timed: the figure). The magics
must not import the client, pandas, ipywidgets or bqplot until a magic runs; the note says which heavy modules
the load pulled in (none expected) and what the first magic then costs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from .common import Figure, median, ratio

RUNS = 5
HEAVY = ("pai_jupyter.client", "httpx", "pydantic", "pandas", "ipywidgets", "bqplot")
SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
t1 = time.perf_counter()
ip.run_line_magic("load_ext", "pai_jupyter")
t2 = time.perf_counter()
heavy = [m for m in {heavy!r} if m in sys.modules]
ip.run_line_magic("pai_profile", "")
t3 = time.perf_counter()
print(json.dumps({{"shell": t1 - t0, "load": t2 - t1, "first_magic": t3 - t2, "heavy": heavy}}))
"""


def _sample(home: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(heavy=HEAVY)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PAI_JUPYTER_HOME": home},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def p7_load_ext() -> Figure:
    fig = Figure("P7", "%load_ext pai_jupyter (fresh interpreter)", "s", "<= 0.5 s")
    with tempfile.TemporaryDirectory(prefix="pai-bench-p7-") as home:
        _sample(home)  # warm the OS file cache: every run after this one reads the same .pyc files
        samples = [_sample(home) for _ in range(RUNS)]
    fig.value = median([float(s["load"]) for s in samples])  # type: ignore[arg-type]
    fig.baseline = median([float(s["shell"]) for s in samples])  # type: ignore[arg-type]
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value <= 0.5)
    heavy = sorted({m for s in samples for m in s["heavy"]})  # type: ignore[attr-defined]
    first = median([float(s["first_magic"]) for s in samples])  # type: ignore[arg-type]
    fig.note = (
        f"median of {RUNS} fresh `python -c` runs of InteractiveShell.instance() then "
        f"`%load_ext pai_jupyter`; baseline: the InteractiveShell start itself; heavy modules imported by "
        f"the load: {', '.join(heavy) or 'none'}; the first magic afterwards (%pai_profile, which imports "
        f"the client) takes {first:.2f} s"
    )
    return fig
