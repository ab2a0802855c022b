"""Captures cut by a snap length (``tcpdump -s N``) and files cut part-way: what the
capture lacks is a note about the capture, never a protocol error, and every command
reads up to the cut. The frames are written by ``helpers.third_party_captures``."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
from helpers.third_party_captures import SNAP_FRAMES, snapped_v1

from mpa_emu.cli import main
from mpa_emu.views.inspection import inspect_capture


def test_snap_length_80_gives_notes_not_errors(tmp_path: Path) -> None:
    path = snapped_v1(tmp_path / "s80.pcap", 80)
    report = inspect_capture(path)
    (conn,) = report.connections
    assert report.errors == 0
    assert not [f for f in conn.findings if f.severity != "note"]
    request = [f.text for f in conn.findings if f.frame == SNAP_FRAMES["request"]]
    # 80 bytes kept of 14 (Ethernet) + 20 (IPv4) + 32 (TCP with timestamps) + 36 (MPA
    # request with 16 bytes of private data): 14 bytes of the request, 22 not captured.
    assert "captured 80 of 102 bytes" in request
    assert any("MPA request captured short: 14 of its bytes" in t for t in request)
    # One note for the client's cut frames: the request (4) and the Send (6, 64 bytes of
    # FPDU of which 14 kept); the Send is placed by its sequence number after them.
    assert any("client: 2 frames captured short (snap length), TCP payload not in the "
               "capture: frame 4 (22 bytes), frame 6 (50 bytes)" in t for t in request)
    assert conn.request is None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["inspect", str(path)]) == 0
    assert "ERROR" not in out.getvalue()


def test_snap_length_100_reads_the_header_and_notes_the_private_data_cut(
        tmp_path: Path) -> None:
    (conn,) = inspect_capture(snapped_v1(tmp_path / "s100.pcap", 100)).connections
    assert conn.errors == 0
    assert conn.request is not None and conn.reply is not None
    assert (conn.request.rev, conn.request.pd_length) == (1, 16)
    assert conn.request.private_data == b"client-hello-p"  # 34 payload bytes kept
    assert any(f.frame == SNAP_FRAMES["request"] and f.severity == "note"
               and "14 bytes of private data in the capture" in f.text
               for f in conn.findings)


def test_whole_frames_still_judged_as_before(tmp_path: Path) -> None:
    (conn,) = inspect_capture(snapped_v1(tmp_path / "s.pcap", 65535)).connections
    assert conn.request is not None and conn.request.private_data == b"client-hello-pd!"
    assert not [f for f in conn.findings if "captured" in f.text]


def test_judge_reads_a_file_cut_part_way_up_to_the_cut(tmp_path: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.fail("tshark is needed (tools/test.sh installs it)")
    whole = snapped_v1(tmp_path / "whole.pcap", 65535).read_bytes()
    # Classic pcap: a 24-byte file header, then per frame a 16-byte record header and
    # the frame; cut 10 bytes into the 7th frame's bytes.
    offset, frames = 24, 0
    while frames < 6:
        caplen = int.from_bytes(whole[offset + 8:offset + 12], "little")
        offset += 16 + caplen
        frames += 1
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(whole[:offset + 16 + 10])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["judge", str(cut)])
    text = out.getvalue()
    assert rc == 0, text
    assert "note: capture ends after frame 6:" in text and "judged up to there" in text
    assert "MPA Request Frame" in text and "MPA Reply Frame" in text
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["judge", "--json", str(cut)]) == 0
    report = json.loads(out.getvalue())
    assert report["capture"] == str(cut)
    assert report["cut"].startswith("capture ends after frame 6:")


def test_diagram_draws_frames_captured_short_with_a_note(tmp_path: Path) -> None:
    from mpa_emu.views.diagram import from_capture
    text = from_capture(snapped_v1(tmp_path / "s80.pcap", 80)).text()
    assert "not decoded" not in text
    request = SNAP_FRAMES["request"]
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if f"#{request} " in line)
    # 80 bytes kept: 14 of the request's 36 bytes (a 20-byte header, 16 of private data).
    assert "[PSH, ACK]" in lines[at] and "len=14" in lines[at]
    assert "captured 80 of 102 bytes (snap length): len= counts the 14 of 36 payload " \
        "bytes captured" in lines[at + 1]
    assert "bad TCP checksum" not in text


def test_inspect_html_shows_frames_captured_short(tmp_path: Path) -> None:
    from mpa_emu.views.html.fields import capture_fields
    fields = dict(capture_fields(snapped_v1(tmp_path / "s80.pcap", 80))[SNAP_FRAMES["request"]])
    assert "not decoded" not in fields
    assert fields["payload"] == "14 bytes"
    assert fields["captured"].startswith("80 of 102 bytes (snap length)")
    assert fields["TCP checksum"] == "not verified: the frame was captured short"
