"""How ``make test`` splits the suite over pytest-xdist workers (tests/conftest.py), checked on a small suite of its
own: a module's tests run on one worker, so its module fixtures start once, and every Slurm test runs on one
worker, so that one test Slurm cluster runs at a time per run. A pytest or xdist release that stops honouring the
groups (as pytest 9.2 did) fails here rather than slowing the suite or loading it with several Slurm clusters."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).parents[2]
MODULE = """
import os
import pytest
{mark}

@pytest.mark.parametrize("i", range(6))
def test_one(i):
    with open(os.environ["WHERE"], "a") as out:
        out.write(f"{{__name__}} {{i}} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
"""


def test_a_modules_tests_share_a_worker_and_every_slurm_test_shares_one(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    for name, mark in [("a", ""), ("b", ""), ("c", ""), ("s1", "pytestmark = pytest.mark.slurm"), ("s2", "")]:
        (suite / f"test_{name}.py").write_text(MODULE.format(mark=mark))
    # s2's Slurm tests are some of its parameters, as in the runtime semantics tests
    s2 = suite / "test_s2.py"
    s2.write_text(s2.read_text().replace("range(6)", "[0, 1, 2, pytest.param(3, marks=pytest.mark.slurm), 4, 5]"))
    where = tmp_path / "where"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WHERE": str(where), "PAI_TEST_HYPOTHESIS": "quick"}
    # its own --basetemp: a pytest session of the default one makes /tmp/pytest-of-<user> 0700 again, which the
    # running suite's tasks of other accounts must traverse
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "tmp")]
    done = subprocess.run(
        [*pytest, "-n", "3", "--dist", "loadgroup", str(suite)],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    lines = where.read_text().splitlines()
    for line in lines:
        module, i, worker = line.split()
        slurm = module == "test_s1" or (module == "test_s2" and i == "3")
        workers["slurm" if slurm else module].add(worker)
    assert len(lines) == 30, lines
    assert {group: len(w) for group, w in workers.items()} == dict.fromkeys(
        ("test_a", "test_b", "test_c", "test_s2", "slurm"), 1
    )
