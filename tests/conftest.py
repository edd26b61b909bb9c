"""What every test shares: the Hypothesis profiles ("full" for ``make test`` and CI, "quick" for
``make test-fast``), chosen by ``PAI_TEST_HYPOTHESIS`` (tests/properties.py)."""

from __future__ import annotations

from hypothesis import settings

from tests.properties import PROFILE, PROFILES, QUICK

if PROFILE not in PROFILES:
    raise RuntimeError(f"PAI_TEST_HYPOTHESIS={PROFILE!r}: one of {', '.join(PROFILES)}")
settings.register_profile("full")
settings.register_profile("quick", max_examples=QUICK)
settings.load_profile(PROFILE)
