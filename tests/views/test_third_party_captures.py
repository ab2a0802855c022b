"""inspect on captures shaped like third-party traffic (SMB Direct over siw, a siw
Terminate, a DDP version 0 Send): the expected side comes from the bytes
``helpers.third_party_captures`` writes and from RFC 5040/5041/6581."""

from __future__ import annotations

from pathlib import Path

from helpers.third_party_captures import (
    READ_SEGMENT,
    READ_SEGMENTS,
    READ_STAG,
    READ_TO,
    SMB_FRAMES,
    smb_direct_siw,
)

from mpa_emu.views.inspection import inspect_capture


def test_server_read_request_is_answered_by_the_client_read_responses(tmp_path: Path) -> None:
    (conn,) = inspect_capture(smb_direct_siw(tmp_path / "smb.pcap")).connections
    read = next(i for i in conn.fpdu_list if i.frame == SMB_FRAMES["read_request"])
    assert (read.side, read.stag, read.to, read.read_size) == (
        "server", READ_STAG, READ_TO, READ_SEGMENTS * READ_SEGMENT)
    responses = [i for i in conn.fpdu_list if i.what.startswith("RDMA Read Response")]
    assert [i.frame for i in responses] == list(range(SMB_FRAMES["first_response"],
                                                      SMB_FRAMES["last_response"] + 1))
    assert not [f for f in conn.findings if "never answered" in f.text]
    assert not [f for f in conn.findings if "Read Response" in f.text]


def test_fpdus_are_listed_in_frame_order(tmp_path: Path) -> None:
    (conn,) = inspect_capture(smb_direct_siw(tmp_path / "smb.pcap")).connections
    frames = [i.frame for i in conn.fpdu_list]
    assert frames == sorted(frames)


def test_a_read_answered_only_in_part_or_at_another_offset_stays_open(tmp_path: Path) -> None:
    path = smb_direct_siw(tmp_path / "smb.pcap")
    from scapy.utils import rdpcap, wrpcap
    frames = list(rdpcap(str(path)))
    # Drop the last Read Response segment: 11,000 of 12,000 bytes arrive, none with L.
    last = SMB_FRAMES["last_response"]
    del frames[last - 1:]
    wrpcap(str(tmp_path / "cut.pcap"), frames)
    (conn,) = inspect_capture(tmp_path / "cut.pcap").connections
    (open_read,) = [f for f in conn.findings if "never answered" in f.text]
    assert open_read.frame == SMB_FRAMES["read_request"]
    assert f"{(READ_SEGMENTS - 1) * READ_SEGMENT} of {READ_SEGMENTS * READ_SEGMENT} bytes" \
        in open_read.text


def test_no_rtr_where_p2p_was_not_negotiated(tmp_path: Path) -> None:
    # siw's request and reply carry the RFC 6581 block without P2P (A): RFC 6581 section
    # 4.1/5 has no RTR then, and the first Send is the ULP's own message.
    (conn,) = inspect_capture(smb_direct_siw(tmp_path / "smb.pcap")).connections
    assert conn.request is not None and conn.request.p2p is False
    assert not conn.rtr.startswith("frame")
    assert "P2P not negotiated" in conn.rtr
    assert not [f for f in conn.findings if "RTR" in f.text]


def test_with_p2p_a_first_send_that_carries_data_is_no_rtr(tmp_path: Path) -> None:
    from helpers.real_like_captures import fpdu
    from helpers.third_party_captures import KEY_REP, KEY_REQ, Builder, mpa_frame, untagged
    b = Builder()
    b.handshake()
    # IRD word: P2P (0x8000), the zero-length Send RTR bit (0x4000), IRD 16; ORD 16
    # (RFC 6581 section 5).
    b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (0xC010, 0x0010)))
    b.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (0xC010, 0x0010)))
    b.add(True, "PA", fpdu(untagged(3, 0, 1, b"not empty"), "zero"))
    (conn,) = inspect_capture(b.write(tmp_path / "p2p.pcap")).connections
    assert conn.rtr.startswith("none: the first FPDU (frame 6) is a Send (9 bytes)")
    assert any(f.frame == 6 and f.severity == "error" and "chose the send RTR" in f.text
               for f in conn.findings)
    b2 = Builder()
    b2.handshake()
    b2.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (0xC010, 0x0010)))
    b2.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (0xC010, 0x0010)))
    b2.add(True, "PA", fpdu(untagged(3, 0, 1, b""), "zero"))
    (conn2,) = inspect_capture(b2.write(tmp_path / "p2p0.pcap")).connections
    assert conn2.rtr == "frame 6: zero-length Send"
    assert conn2.errors == 0


def test_siw_terminate_is_read_in_the_layout_its_quoted_header_agrees_with(
        tmp_path: Path) -> None:
    from helpers.third_party_captures import TERM_FRAMES, siw_terminate
    (conn,) = inspect_capture(siw_terminate(tmp_path / "t.pcap")).connections
    term = next(i for i in conn.fpdu_list if i.frame == TERM_FRAMES["terminate"])
    # Written as layer 1 (DDP), EType 2 (untagged buffer), code 0x02 (RFC 5041 section
    # 7.2: Invalid MSN - no buffer available), M and D set, 2 + 18 quoted bytes.
    assert "layer DDP (1), type Untagged Buffer Error (2), code 0x02 Invalid MSN - no " \
        "buffer available" in term.what
    assert "siw" in term.what
    notes = [f.text for f in conn.findings if f.frame == TERM_FRAMES["terminate"]
             and f.severity == "note" and "quotes the DDP header" not in f.text]
    assert len(notes) == 1 and "struct iwarp_terminate" in notes[0]
    assert "20 bytes quoted after it are what its M D bits announce" in notes[0]
    # The RFC 5040 reading of the same bytes is what the report said before.
    assert "layer LLP (2)" in notes[0]


def test_rfc_terminate_keeps_the_rfc_reading_without_a_layout_note(tmp_path: Path) -> None:
    from helpers.third_party_captures import TERM_FRAMES, siw_terminate
    path = siw_terminate(tmp_path / "t.pcap", layout="rfc")
    (conn,) = inspect_capture(path).connections
    term = next(i for i in conn.fpdu_list if i.frame == TERM_FRAMES["terminate"])
    assert term.what == ("Terminate: layer DDP (1), type Untagged Buffer Error (2), code "
                         "0x02 Invalid MSN - no buffer available")
    # No layout note; the one note names the Send whose header it quotes (RFC 5040
    # section 4.8).
    assert [f.text for f in conn.findings if f.severity == "note"
            and f.frame == TERM_FRAMES["terminate"]] == [
        f"server Terminate quotes the DDP header of frame {TERM_FRAMES['send']} (the "
        "client's Send, QN 0 MSN 1 MO 0)"]


def test_semantic_replay_reads_the_siw_terminate_and_calls_no_crc_error(
        tmp_path: Path) -> None:
    from helpers.replay_cli import replay
    from helpers.third_party_captures import SERVER, siw_terminate
    path = siw_terminate(tmp_path / "t.pcap")
    _rc, out, _report = replay(path, "--emulate", SERVER, "--semantic", tmp_path=tmp_path)
    recorded = next(line for line in out.splitlines()
                    if line.strip().startswith("recorded"))
    assert "Terminate (DDP layer, etype 2, code 0x02, siw layout) at frame 7" in recorded
    assert "CRC" not in recorded


def test_an_mpa_code_2_terminate_is_no_crc_error_without_crc() -> None:
    from helpers.third_party_captures import rfc_terminate_word, untagged

    from mpa_emu.replay.semantic import terminate_words
    ulpdu = untagged(7, 2, 1, rfc_terminate_word(2, 0, 0x02, False, False, False))
    assert terminate_words(ulpdu, crc=True) == "Terminate (MPA layer, etype 0, CRC error)"
    without = terminate_words(ulpdu, crc=False)
    assert "CRC error" not in without and "no CRC was negotiated" in without


def test_ddp_and_rdmap_version_zero_are_errors_in_inspect_diagram_and_judge(
        tmp_path: Path) -> None:
    import shutil

    import pytest
    from helpers.third_party_captures import VERSION_FRAMES, ddp_version_zero

    from mpa_emu.capture.tshark import Tshark
    from mpa_emu.cli.judge import judge_capture
    from mpa_emu.views.diagram import from_capture
    path = ddp_version_zero(tmp_path / "v.pcap")
    (conn,) = inspect_capture(path).connections
    errs = {(f.frame, f.text.split(": ")[1].split(",")[0]) for f in conn.findings
            if f.severity == "error"}
    assert errs == {(VERSION_FRAMES["dv0"], "DDP version 0"),
                    (VERSION_FRAMES["rv0"], "RDMAP version 0")}
    text = from_capture(path).text()
    assert "FPDU Send ulpdu=25 L=1 DDP version 0" in text
    assert "FPDU Send ulpdu=25 L=1 RDMAP version 0" in text
    assert "FPDU Send ulpdu=22 L=1\n" in text
    if shutil.which("tshark") is None:
        pytest.fail("tshark is needed (tools/test.sh installs it)")
    report = judge_capture(Tshark(disable_rpcrdma=True), str(path))
    assert report["problems"] == [
        f"frame {VERSION_FRAMES['dv0']}: DDP version 0 (RFC 5041 section 4.2: 1)",
        f"frame {VERSION_FRAMES['rv0']}: RDMAP version 0 (RFC 5040 section 4.2: 1)"]


def test_siw_rtr_mismatch_terminate_before_any_peer_fpdu_reads_as_llp(tmp_path: Path) -> None:
    from helpers.real_like_captures import fpdu
    from helpers.third_party_captures import (
        KEY_REP,
        KEY_REQ,
        Builder,
        mpa_frame,
        siw_terminate_word,
        untagged,
    )
    # A siw initiator offering only the Write RTR; the reply picks Read: siw_proc_mpareply
    # sends a Terminate LLP/MPA/0x07 (no matching RTR, RFC 6581 section 9) in its
    # little-endian layout, with no header quoted, as its first FPDU.
    b = Builder()
    b.handshake()
    b.add(True, "PA", mpa_frame(KEY_REQ, 0x10, 2, (0x8010, 0x8010)))
    b.add(False, "PA", mpa_frame(KEY_REP, 0x10, 2, (0x8010, 0x4010)))
    term = untagged(7, 2, 1, siw_terminate_word(2, 0, 0x07, False, False, False))
    b.add(True, "PA", fpdu(term, "zero"))
    (conn,) = inspect_capture(b.write(tmp_path / "rtr.pcap")).connections
    (info,) = [i for i in conn.fpdu_list if i.frame == 6]
    assert info.what == ("Terminate: layer LLP (2), type MPA (0), code 0x07 No matching RTR "
                         "option (siw layout)")
