"""Fixtures of the CM core tests."""

from __future__ import annotations

import pytest
from helpers.cm_harness import Pair, make_pair


@pytest.fixture
def pair() -> Pair:
    """An untagged IPv4 pair of default (kernel, GEN_2) hosts."""
    return make_pair()
