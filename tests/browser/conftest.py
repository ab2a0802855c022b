"""Headless Chromium for the browser tests (marker ``browser``): one browser per test
module, driven by tools/browser.py over the DevTools pipe. Chromium missing is a
failure naming the fix, never a skip."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers.rendered import browser_tool


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """A running headless Chromium (1400x900)."""
    try:
        browser_tool.chromium_path()
    except browser_tool.BrowserError as exc:
        pytest.fail(str(exc))
    with browser_tool.Chromium() as browser:
        yield browser
