"""Shared test configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from scapy.config import conf


@pytest.fixture
def strict_dissection() -> Iterator[None]:
    """Make scapy re-raise dissector errors instead of hiding them behind Raw (a test
    module opts in with ``pytestmark = pytest.mark.usefixtures("strict_dissection")``)."""
    saved = conf.debug_dissector
    conf.debug_dissector = True
    yield
    conf.debug_dissector = saved
