"""A Slurm job's place and start estimate as squeue prints them (``FORMAT``, its ``%S`` being what ``squeue --start``
shows for a pending job): the queue's answer (``Runtime.held``) and the spawn page say them."""

from __future__ import annotations

import time

from pai_jupyter.cluster.runtime.slurm.commands import ahead_of, expected_start, parse_squeue, why_pending

SQUEUE = """7|RUNNING|None|n[1-2]|debug|100|2026-05-01T11:40:00
8|PENDING|Resources||debug|100|2026-05-01T12:10:00
9|PENDING|Priority||debug|100|N/A
10|PENDING|Priority||debug|200|Unknown
11|PENDING|Resources||other|100|2026-05-01T12:30:00
"""


def test_a_pending_jobs_expected_start_is_read_in_squeues_time_zone_and_none_where_slurm_has_none() -> None:
    seen = parse_squeue(SQUEUE)
    assert seen["8"].start == time.mktime((2026, 5, 1, 12, 10, 0, 0, 0, -1))
    assert seen["9"].start is None and seen["10"].start is None  # N/A, Unknown: nothing bounds them yet
    assert seen["7"].start is None  # a running job's %S is when it started: no estimate
    assert expected_start("garbage") is None and expected_start("") is None


def test_a_pending_jobs_place_is_slurms_order_within_its_partition() -> None:
    seen = parse_squeue(SQUEUE)
    assert ahead_of("10", seen) == 0  # the highest priority first
    assert ahead_of("8", seen) == 1 and ahead_of("9", seen) == 2  # then by job id
    assert ahead_of("11", seen) == 0  # another partition's line
    assert why_pending("9", seen).endswith("2 jobs ahead in partition 'debug'")
