"""replay --semantic --html: the frame of the first difference in outcome is the
highlighted one (never green) and the page carries the semantic explanation the text
prints. The expected frame and words come from the real captures' sidecars
(pcaps/real/*.json ``replays``, written from the frames and the kernel source)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.replay_cli import replay

from mpa_emu.cli import main

REAL = Path(__file__).resolve().parents[2] / "pcaps" / "real"


def semantic_cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for side in sorted(REAL.glob("*.json")):
        facts = json.loads(side.read_text())
        out += [(side.stem, r) for r in facts.get("replays", [])
                if "--semantic" in r["args"] and r["expect"].get("first_divergence_frame")
                and "--checksums" not in r["args"]]
    return out


CASES = semantic_cases()


def test_there_are_semantic_cases() -> None:
    assert len(CASES) >= 4


@pytest.mark.parametrize(("name", "case"), CASES,
                         ids=[f"{n}-{c['emulate']}-{'-'.join(c['args'])}" for n, c in CASES])
def test_semantic_page_highlights_the_difference_and_explains_it(
        name: str, case: dict[str, Any], tmp_path: Path) -> None:
    html = tmp_path / "page.html"
    args = ["--emulate", case["emulate"], *case["args"], "--html", str(html)]
    rc, out, report = replay(REAL / f"{name}.pcap", *args, tmp_path=tmp_path)
    assert rc == case["expect"]["exit"]
    first = case["expect"]["first_divergence_frame"]
    text = html.read_text()
    marks = dict((int(f), m) for m, f in re.findall(
        r'<g class="row (hl|rel|ok)" data-row="\d+"[^>]*data-frame="(\d+)"', text))
    assert marks.get(first) == "hl"
    assert [f for f, m in marks.items() if m == "hl"] == [first]
    sem = report["semantic"]["divergences"][0]
    assert sem["frame"] == first
    why = re.search(r'id="outcome-why">([^<]*)<', text)
    assert why is not None
    from html import unescape
    assert unescape(why.group(1)) == sem["text"]
    assert sem["text"] in out
    for d in report["semantic"]["divergences"]:
        assert marks.get(d["frame"]) in ("hl", "rel")


def test_frame_mode_page_is_unchanged_by_the_outcome_sections(tmp_path: Path) -> None:
    html = tmp_path / "page.html"
    main(["replay", str(REAL / "real_peer_v2.pcap"), "--emulate", "192.0.2.2", "--html",
          str(html)])
    text = html.read_text()
    assert "Outcome per connection" not in text and 'id="outcome-why"' not in text
