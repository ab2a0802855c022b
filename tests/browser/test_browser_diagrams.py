"""The SVG ladder diagrams rendered by Chromium: no console error, every text inside its
lane as the browser measures it, and a picture that is not blank."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.rendered import colour_count, overflow

from mpa_emu.cli import main

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.browser

SOURCES = [
    "scenarios/reject_with_private_data.toml",
    "scenarios/v2_accept.toml",
    "scenarios/teardown_null_qp.toml",
    "scenarios/ipv6_vlan_lossy.toml",
    "scenarios/irdma_initiator_siw_responder.toml",
    "pcaps/v2_accept_ipv6.pcapng",
    "pcaps/divergent_linux_synack.pcap",
    "pcaps/parse_pd_over_512.pcap",
]


def _render(chromium: Any, source: str, tmp_path: Path) -> Any:
    out = tmp_path / (Path(source).stem + ".svg")
    assert main(["diagram", str(ROOT / source), "-o", str(out)]) == 0
    return chromium.open(out)


@pytest.mark.parametrize("source", SOURCES)
def test_diagram_renders_with_every_text_inside_its_lane(chromium: Any, source: str,
                                                         tmp_path: Path) -> None:
    page = _render(chromium, source, tmp_path)
    assert page.console_errors == []
    result = overflow(page)
    rows = page.evaluate("document.querySelectorAll('g.row').length")
    assert rows > 0 and result["checked"] >= rows
    assert result["bad"] == [], f"text outside its lane: {result['bad'][:3]}"


def test_diagram_screenshot_is_not_blank(chromium: Any, tmp_path: Path) -> None:
    page = _render(chromium, SOURCES[0], tmp_path)
    total, inked, histogram = colour_count(page.screenshot())
    # Black arrows and text, grey lanes, green upcalls, blue details: a drawing, not a
    # white page (anti-aliasing adds the in-between shades).
    assert inked > total // 200
    assert len(histogram) > 20
    assert any(g > r + 40 and g > b + 20 for r, g, b in histogram)  # the green upcalls


def test_the_lane_check_catches_text_that_runs_across_a_lane(chromium: Any,
                                                            tmp_path: Path) -> None:
    # The same structure as a diagram (lanes, a row group with an arrow and a note), by
    # hand: the arrow's label is far wider than the 200 px between the lanes.
    svg = tmp_path / "wide.svg"
    svg.write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" width="600" height="120" '
        'viewBox="0 0 600 120"><line class="lane" x1="100" y1="0" x2="100" y2="120"/>'
        '<line class="lane" x1="300" y1="0" x2="300" y2="120"/>'
        '<g class="row"><line class="arrow" x1="100" y1="40" x2="296" y2="40"/>'
        '<text x="200" y="36" style="text-anchor: middle; font: 11px monospace">'
        + "W" * 60 + "</text></g>"
        '<g class="row"><circle cx="100" cy="80" r="3"/>'
        '<text x="108" y="84" style="font: 11px monospace">short</text></g></svg>')
    page = chromium.open(svg)
    result = overflow(page)
    assert result["checked"] == 2
    assert [b["text"] for b in result["bad"]] == ["W" * 60]
