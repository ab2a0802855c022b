"""Fixtures for live tests (marker ``live``): see live_lab.py for the lab itself."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from helpers.live_lab import Lab, make_lab


@pytest.fixture
def lab() -> Iterator[Lab]:
    """A fresh namespace + TAP per test, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("live tests need root for network namespaces and /dev/net/tun "
                    "(CI runs them as root)")
    yield from make_lab()
