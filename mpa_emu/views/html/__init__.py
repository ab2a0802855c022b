"""Self-contained HTML reports of ``replay``, ``inspect`` and ``run`` (``--html FILE``):
the ladder as inline SVG, each frame's decoded fields on hover or click, the divergence
or failed expectation highlighted with expected and actual side by side, the upcalls and
the trace records. Nothing on the page is fetched from anywhere.

This package holds the parts every page shares (:mod:`.page`, :mod:`.fields`) and the
inspect page; the replay and run pages live beside what they show
(:mod:`mpa_emu.replay.html_page`, :mod:`mpa_emu.scenario.html_page`), as views sit below
replay and scenario in the layers."""

from __future__ import annotations

from pathlib import Path


def write_page(path: str | Path, page: str) -> None:
    """Write a rendered page (UTF-8). Raises OSError when the file cannot be written."""
    Path(path).write_text(page, encoding="utf-8")


__all__ = ["write_page"]
