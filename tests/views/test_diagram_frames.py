"""Ladders and diagrams name frames by number as the reports do, show the DDP L bit,
never cut a label, and ``-o FILE.png`` writes PNG (rendered) or refuses in one line.
Expected values come from the captures the tests write (helpers.third_party_captures)
and the real captures' sidecars."""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import re
import struct
from pathlib import Path

import pytest
from helpers.third_party_captures import (
    READ_SEGMENTS,
    SMB_FRAMES,
    smb_direct_siw,
)

from mpa_emu.cli import main
from mpa_emu.views.diagram import from_capture

REAL = Path(__file__).resolve().parents[2] / "pcaps" / "real"


def svg_rows(svg: str) -> dict[int, list[str]]:
    """Frame number -> the texts of its row (arrow label pieces and detail lines)."""
    out: dict[int, list[str]] = {}
    for frame, body in re.findall(r'<g class="row[^"]*" data-row="\d+" data-frame="(\d+)">'
                                  r"(.*?)</g>", svg, re.S):
        out[int(frame)] = [html.unescape(t) for t in
                           re.findall(r'<text[^>]*class="(?:label|note|detail)"[^>]*>([^<]*)<',
                                      body)]
    return out


@pytest.mark.parametrize("name", sorted(p.stem for p in REAL.glob("*.pcap")))
def test_every_frame_is_numbered_in_text_and_svg(name: str) -> None:
    frames = json.loads((REAL / f"{name}.json").read_text())["frames"]
    ladder = from_capture(REAL / f"{name}.pcap")
    text = ladder.text()
    for n in range(1, frames + 1):
        assert f"#{n} " in text
    rows = svg_rows(ladder.svg())
    assert sorted(rows) == list(range(1, frames + 1))
    for n, texts in rows.items():
        assert texts[0].startswith(f"#{n} ")


@pytest.mark.parametrize("name", sorted(p.stem for p in REAL.glob("*.pcap")))
def test_svg_labels_are_whole(name: str) -> None:
    ladder = from_capture(REAL / f"{name}.pcap")
    svg = ladder.svg()
    assert "..." not in svg
    rows = svg_rows(svg)
    for row in ladder.rows:
        if row.frame is None or row.target is None:
            continue
        shown = " ".join(rows[row.frame])
        assert f"#{row.frame} {row.label}" in shown


def test_svg_canvas_fits_the_lanes_and_the_longest_label(tmp_path: Path) -> None:
    ladder = from_capture(smb_direct_siw(tmp_path / "smb.pcap"))
    svg = ladder.svg()
    width = int(re.search(r'<svg[^>]*width="(\d+)"', svg).group(1))  # type: ignore[union-attr]
    lanes = sorted(int(x) for x in re.findall(r'<line x1="(\d+)"[^>]*class="lane"', svg))
    assert len(lanes) == 2
    longest = max(len(f"#{r.frame} {r.label}") for r in ladder.rows if r.target is not None)
    # 11 px monospace: about 6.7 px a character; the lanes hold the longest label whole,
    # and the canvas ends shortly after the last lane (its title and notes).
    assert lanes[1] - lanes[0] >= longest * 6.7
    assert width - lanes[1] < 300


def test_the_ddp_last_bit_is_shown(tmp_path: Path) -> None:
    text = from_capture(smb_direct_siw(tmp_path / "smb.pcap")).text()
    responses = [line for line in text.splitlines() if "FPDU RDMA Read Response" in line]
    assert len(responses) == READ_SEGMENTS
    assert all("L=0" in line for line in responses[:-1])
    assert "L=1" in responses[-1]
    assert f"#{SMB_FRAMES['read_request']} " in text


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack("!II", data[16:24])  # IHDR, PNG specification 11.2.2
    return width, height


def test_png_output_is_png_at_the_svg_size(tmp_path: Path) -> None:
    cap = str(REAL / "real_peer_v2.pcap")
    assert main(["diagram", cap, "-o", str(tmp_path / "d.svg")]) == 0
    svg = (tmp_path / "d.svg").read_text()
    w, h = (int(v) for v in re.search(  # type: ignore[union-attr]
        r'<svg[^>]*width="(\d+)" height="(\d+)"', svg).groups())
    assert main(["diagram", cap, "-o", str(tmp_path / "d.png")]) == 0
    assert _png_size(tmp_path / "d.png") == (w, h)


def test_png_without_a_renderer_is_a_one_line_error(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    saved = os.environ["PATH"]
    os.environ["PATH"] = str(tmp_path)  # no rsvg-convert, no chromium
    try:
        rc = main(["diagram", str(REAL / "real_peer_v2.pcap"), "-o", str(tmp_path / "d.png")])
    finally:
        os.environ["PATH"] = saved
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write PNG: no SVG renderer found" in err
    assert not (tmp_path / "d.png").exists()


def test_text_output_is_unchanged_by_the_png_path(tmp_path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["diagram", str(REAL / "real_peer_v2.pcap")]) == 0
    assert out.getvalue().splitlines()[1].startswith("0.000000    |-- #1 ")
