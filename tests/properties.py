"""How many examples a property test runs, by Hypothesis profile (registered in tests/conftest.py, chosen by
``PAI_TEST_HYPOTHESIS``): "full" (``make test``, CI) runs each test's own count; "quick" (``make test-fast``)
runs at most ``QUICK`` of them, enough to catch a property broken outright while the inner loop stays short."""

from __future__ import annotations

import os

PROFILE = os.environ.get("PAI_TEST_HYPOTHESIS", "full")
PROFILES = ("full", "quick")
QUICK = 25


def examples(full: int) -> int:
    """``full`` under the full profile, at most ``QUICK`` under the quick one."""
    return full if PROFILE == "full" else min(full, QUICK)
