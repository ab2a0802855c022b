"""Shared test configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from scapy.config import conf


@pytest.fixture
def strict_dissection() -> Iterator[None]:
    """Make scapy re-raise dissector errors instead of hiding them behind Raw (a test
    module opts in with ``pytestmark = pytest.mark.usefixtures("strict_dissection")``)."""
    saved = conf.debug_dissector
    conf.debug_dissector = True
    yield
    conf.debug_dissector = saved


@pytest.fixture(autouse=True)
def strict_reachability() -> Iterator[None]:
    """Every test fails when a transition row marked unreachable runs."""
    from mpa_emu.cm import transitions

    saved = transitions.STRICT_REACHABILITY
    transitions.STRICT_REACHABILITY = True
    yield
    transitions.STRICT_REACHABILITY = saved


# The long fuzz profile, for deliberate runs only (about 10^6 steps over the property
# tests of tests/cm/test_fuzz_core.py):
#     pytest -m fuzz --hypothesis-profile=fuzz-long
settings.register_profile("fuzz-long", max_examples=25_000, deadline=None,
                          suppress_health_check=list(HealthCheck))
