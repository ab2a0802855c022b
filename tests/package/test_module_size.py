"""No module of the package grows past 900 lines: a module that size does several jobs,
and the layered tree (wire, capture, views, cm, offload, net, ...) has a place for each."""

from __future__ import annotations

from pathlib import Path

import pytest

import mpa_emu

pytestmark = pytest.mark.source

LIMIT = 900


def test_no_module_over_the_limit() -> None:
    root = Path(mpa_emu.__file__).parent
    sizes = {str(p.relative_to(root)): len(p.read_text().splitlines())
             for p in root.rglob("*.py")}
    assert len(sizes) > 100  # the whole package was read
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
