"""``mpa-emu judge``: tshark's verdicts on a capture, exit 0 when clean, 1 on problems,
2 with one line when there is no file or no tshark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scapy.utils import wrpcap

from mpa_emu.cli import main
from mpa_emu.frames import MPAReply, MPARequest
from mpa_emu.frames.conversation import Conversation
from mpa_emu.wire import ddp

pytestmark = pytest.mark.tshark


def _capture(tmp_path: Path, *, bad_crc: bool = False) -> Path:
    conv = Conversation()
    conv.handshake()
    conv.data(True, bytes(MPARequest(flags="CS", rev=2, ird=8, ord=8, write0=1, read0=1)))
    conv.data(False, bytes(MPAReply(flags="CS", rev=2, ird=8, ord=8, read0=1)))
    rtr = ddp.fpdu(ddp.read_rtr())
    conv.data(True, rtr[:-1] + bytes([rtr[-1] ^ 1]) if bad_crc else rtr)
    path = tmp_path / "judge.pcap"
    wrpcap(str(path), conv.packets)
    return path


def test_clean_capture_exits_0_and_lists_frames_and_crc(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", str(_capture(tmp_path)), "--checksums"]) == 0
    out = capsys.readouterr().out
    assert "MPA Request Frame" in out and "Read Request [last DDP segment]" in out
    assert "CRC: 1 good, 0 bad, 0 unchecked" in out
    assert "Rev field is NOT set to one as required by RFC 5044 (x2)" in out
    assert out.rstrip().endswith("problems:\n  none")


def test_bad_crc_exits_1_and_names_the_frame(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", str(_capture(tmp_path, bad_crc=True))]) == 1
    out = capsys.readouterr().out
    assert "CRC: 0 good, 1 bad, 0 unchecked" in out
    assert "frame 8: CRC check:" in out and "Bad CRC32, should be" in out


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", str(_capture(tmp_path)), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["problems"] == []
    assert [v["status"] for v in report["crc"]] == ["good"]
    assert {e["summary"] for e in report["expert"]} == {
        "Res field is NOT set to zero as required by RFC 5044",
        "Rev field is NOT set to one as required by RFC 5044"}


def test_missing_file_and_missing_tshark_are_one_line_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", str(tmp_path / "nothing.pcap")]) == 2
    assert capsys.readouterr().err.strip() == \
        f"mpa-emu judge: error: no such capture file: {tmp_path / 'nothing.pcap'}"
    path = _capture(tmp_path)
    assert main(["judge", str(path), "--tshark", str(tmp_path / "no-tshark")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mpa-emu judge: error: tshark not found") and err.count("\n") == 1


def test_unreadable_capture_is_a_one_line_error(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\x00" * 64)
    assert main(["judge", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == (f"mpa-emu judge: error: {bad}: not a pcap or pcapng file "
                   "(starts with 00 00 00 00)\n")
    # Cut inside its first record (24-byte file header, 16-byte record header): not one
    # whole frame, tshark refuses it and so does judge.
    whole = _capture(tmp_path).read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(whole[:24 + 16 + 10])
    assert main(["judge", str(cut)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mpa-emu judge: error: tshark exited") and err.count("\n") == 1
    # Cut inside a later record: judged up to the cut, as inspect reads it.
    first = int.from_bytes(whole[24 + 8:24 + 12], "little")
    cut.write_bytes(whole[:24 + 16 + first + 20])
    assert main(["judge", str(cut)]) == 0
    out = capsys.readouterr().out
    assert "note: capture ends after frame 1: " in out


def test_empty_and_text_files_are_refused_not_judged_clean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # tshark 4.0 reads both as a capture of nothing and exits 0.
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    assert main(["judge", str(empty)]) == 2
    assert capsys.readouterr().err == \
        f"mpa-emu judge: error: {empty}: empty file: not a pcap or pcapng capture\n"
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert main(["judge", str(text)]) == 2
    assert capsys.readouterr().err == \
        f"mpa-emu judge: error: {text}: not a pcap or pcapng file (starts with 68 65 6c 6c)\n"
