"""The HTML reports read TCP checksums as the text reports do (``--checksums``): on a real
capture taken on its client (pcaps/real, the sidecar lists the offload partial sums),
every frame is decoded in every reading, and the verdict shown is the reading's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mpa_emu.cli import main

REAL = Path(__file__).resolve().parents[2] / "pcaps" / "real"
CAPTURE = "real_peer_v2"
SERVER = "192.0.2.2"
VERDICT = {"offload": "TX checksum offload: not verified",
           "strict": "TX offload partial sum: an error with --checksums strict",
           "off": "not verified (--checksums off)"}


def page_data(html: Path) -> dict[str, Any]:
    """The JSON the page carries (its frames' fields) and its SVG ladder's text."""
    text = html.read_text()
    payload = re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                        text, re.S)
    assert payload is not None
    data: dict[str, Any] = json.loads(payload.group(1).replace("<\\/", "</"))
    data["svg_text"] = " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", text))
    return data


@pytest.mark.parametrize("mode", ["offload", "strict", "off"])
@pytest.mark.parametrize("command", ["inspect", "replay"])
def test_html_frames_follow_the_checksum_reading(command: str, mode: str,
                                                 tmp_path: Path) -> None:
    facts = json.loads((REAL / f"{CAPTURE}.json").read_text())
    html = tmp_path / "page.html"
    args = ([command, str(REAL / f"{CAPTURE}.pcap"), "--checksums", mode, "--html",
             str(html)] + (["--emulate", SERVER] if command == "replay" else []))
    main(args)
    data = page_data(html)
    frames = data["frames"]
    assert len(frames) == facts["frames"]
    for number, fields in frames.items():
        named = dict(fields)
        assert "not decoded" not in named, (number, named)
        want = (VERDICT[mode] if int(number) in facts["checksums"]["offload_partial"]
                else "not verified (--checksums off)" if mode == "off" else "correct")
        assert named["TCP checksum"] == want, number
    # The ladder marks what the text diagram marks in that reading.
    marked = "TCP checksum: offload artefact" in data["svg_text"]
    assert marked == (mode == "strict")
    noted = "TX checksum offload: not verified" in data["svg_text"]
    assert noted == (mode == "offload")
