"""The tshark judge itself: it must see what is wrong (bad CRCs, PD_Length above 512,
RPC-over-RDMA's malformed short Sends), read unchecked CRCs, parse tshark's expert
table, and fail loudly when tshark is missing or the capture is unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.utils import wrpcap

from mpa_emu.capture.tshark import (
    ExpertInfo,
    Tshark,
    TsharkError,
    TsharkNotFound,
    find_tshark,
    parse_expert_table,
)
from mpa_emu.frames import MPAReply, MPARequest
from mpa_emu.frames.conversation import Conversation
from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import KEY_REQ, frame_fpdu

pytestmark = pytest.mark.tshark

# The layout of tshark 4.0.17's "-q -z expert" output (spec wireshark-mpa section 7).
EXPERT_TEXT = """
Errors (1)
=============
   Frequency      Group           Protocol  Summary
           1  Malformed          IWARP_MPA  [PD length field indicates more 512 bytes of \
Private Data]

Warns (4)
=============
   Frequency      Group           Protocol  Summary
           2    Request          IWARP_MPA  Res field is NOT set to zero as required by RFC 5044
           2    Request          IWARP_MPA  Rev field is NOT set to one as required by RFC 5044

Notes (2)
=============
   Frequency      Group           Protocol  Summary
           2   Response          IWARP_MPA  Reject bit set by Responder

Chats (1)
=============
   Frequency      Group           Protocol  Summary
           1 Dissector bug                TCP  Connection establish request (SYN): server port 31000
"""


@pytest.fixture(scope="module")
def judge() -> Tshark:
    return Tshark()


def _write(tmp_path: Path, conv: Conversation, name: str = "c.pcap") -> Path:
    path = tmp_path / name
    wrpcap(str(path), conv.packets)
    return path


def _accepted(v2: bool = False, flags: str = "C") -> Conversation:
    conv = Conversation()
    conv.handshake()
    if v2:
        conv.data(True, bytes(MPARequest(flags=flags + "S", rev=2, ird=1, ord=1, write0=1,
                                         read0=1)))
        conv.data(False, bytes(MPAReply(flags=flags + "S", rev=2, ird=1, ord=1, read0=1)))
    else:
        conv.data(True, bytes(MPARequest(flags=flags, rev=1)))
        conv.data(False, bytes(MPAReply(flags=flags, rev=1)))
    return conv


def test_parse_expert_table_reads_every_section_and_column() -> None:
    rows = parse_expert_table(EXPERT_TEXT)
    assert rows[0] == ExpertInfo("Error", "Malformed", "IWARP_MPA",
                                 "[PD length field indicates more 512 bytes of Private Data]", 1)
    assert [r.severity for r in rows] == ["Error", "Warning", "Warning", "Note", "Chat"]
    assert rows[3] == ExpertInfo("Note", "Response", "IWARP_MPA",
                                 "Reject bit set by Responder", 2)
    assert rows[4].group == "Dissector bug" and rows[4].protocol == "TCP"


def test_parse_expert_table_of_a_clean_capture_is_empty() -> None:
    assert parse_expert_table("\n") == []


def test_missing_tshark_raises_not_skips(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MPA_EMU_TSHARK", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TsharkNotFound, match="apt-get install tshark"):
        find_tshark()
    with pytest.raises(TsharkNotFound):
        Tshark(path=str(tmp_path / "tshark"))


def test_unreadable_capture_raises_with_tsharks_reason(judge: Tshark, tmp_path: Path) -> None:
    bad = tmp_path / "garbage.pcap"
    bad.write_bytes(b"this is not a capture file at all")
    with pytest.raises(TsharkError, match="exited"):
        judge.fields(bad, ["frame.number"])


def test_corrupted_crc_is_judged_bad_with_the_right_value(judge: Tshark,
                                                          tmp_path: Path) -> None:
    conv = _accepted()
    good = ddp.fpdu(ddp.read_rtr())
    conv.data(True, good[:-4] + bytes(4))
    path = _write(tmp_path, conv)
    (verdict,) = judge.crc_verdicts(path)
    assert verdict.status == "bad" and verdict.value == 0
    # tshark reads the 4 bytes big-endian, so it wants our little-endian bytes' value.
    assert verdict.expected == int.from_bytes(good[-4:], "big")
    assert any("Bad CRC32" in p for p in judge.problems(path))


def test_big_endian_crc_is_judged_bad(judge: Tshark, tmp_path: Path) -> None:
    conv = _accepted()
    good = ddp.fpdu(ddp.read_rtr())
    conv.data(True, good[:-4] + good[-4:][::-1])
    (verdict,) = judge.crc_verdicts(_write(tmp_path, conv))
    assert not verdict.good and verdict.expected == int.from_bytes(good[-4:], "big")


def test_crc_without_c_flag_is_reported_unchecked(judge: Tshark, tmp_path: Path) -> None:
    conv = _accepted(flags="")
    conv.data(True, frame_fpdu(ddp.read_rtr(), crc=0))
    (verdict,) = judge.crc_verdicts(_write(tmp_path, conv))
    assert verdict.status == "unchecked" and verdict.value == 0


def test_pd_length_above_512_is_an_error_the_judge_reports(judge: Tshark,
                                                           tmp_path: Path) -> None:
    conv = Conversation()
    conv.handshake()
    conv.data(True, KEY_REQ + bytes([0x40, 1]) + (600).to_bytes(2, "big") + bytes(600))
    path = _write(tmp_path, conv)
    assert judge.expert(path) == [e for e in judge.expert(path) if e.severity != "Error"]
    filtered = judge.expert(path, "iwarp_mpa")
    assert any(e.severity == "Error" and e.group == "Malformed" for e in filtered)
    assert any("512" in p for p in judge.problems(path))


def test_short_send_is_malformed_unless_rpcrdma_is_disabled(judge: Tshark,
                                                            tmp_path: Path) -> None:
    conv = _accepted()
    conv.data(False, ddp.fpdu(ddp.send(b"hello", msn=1)))
    path = _write(tmp_path, conv)
    assert any("Malformed" in p for p in judge.problems(path))
    assert Tshark(disable_rpcrdma=True).problems(path) == []


def test_fields_lists_every_occurrence_per_frame(judge: Tshark, tmp_path: Path) -> None:
    conv = _accepted()
    conv.data(False, ddp.fpdu(ddp.send(b"x" * 40, 1)) + ddp.fpdu(ddp.send(b"y" * 40, 2)))
    path = _write(tmp_path, conv)
    rows = judge.field_by_frame(path, ["iwarp_ddp.msn"], "iwarp_ddp.msn")
    (row,) = rows.values()
    assert row["iwarp_ddp.msn"] == ["1", "2"]


def test_v2_warnings_show_in_the_table_but_not_in_the_tree(judge: Tshark,
                                                           tmp_path: Path) -> None:
    path = _write(tmp_path, _accepted(v2=True))
    assert {e.summary for e in judge.expert(path) if e.severity == "Warning"} == {
        "Res field is NOT set to zero as required by RFC 5044",
        "Rev field is NOT set to one as required by RFC 5044"}
    assert [e for e in judge.tree_experts(path) if e.severity == "Warning"] == []
    assert judge.problems(path) == []


def test_terminate_header_copies_as_irdma_builds_them(judge: Tshark, tmp_path: Path) -> None:
    conv = _accepted()
    rtr = ddp.fpdu(ddp.read_rtr())
    # DDP layer, untagged buffer error: length, DDP header and RDMAP header (M, D, R).
    conv.data(False, ddp.fpdu(ddp.terminate(ddp.TermLayer.DDP, 2, 1, terminated=rtr)))
    # A segment too short for a DDP header: irdma sets M alone and copies the length.
    conv.data(False, ddp.fpdu(ddp.terminate(ddp.TermLayer.DDP, 2, 1,
                                            terminated=bytes.fromhex("000a") + bytes(10))))
    path = _write(tmp_path, conv)
    full, short = judge.fields(path, ["iwarp_rdma.term_hdrct_m", "iwarp_rdma.hdrct_d",
                                      "iwarp_rdma.hdrct_r", "iwarp_rdma.term_ddp_seg_len",
                                      "iwarp_rdma.term_ddp_h", "iwarp_rdma.term_rdma_h"],
                               "iwarp_rdma.opcode == 7")
    assert full["iwarp_rdma.term_ddp_seg_len"] == ["002e"]
    assert full["iwarp_rdma.term_ddp_h"] == [rtr[2:20].hex()]
    assert full["iwarp_rdma.term_rdma_h"] == [rtr[20:48].hex()]
    assert [short[f][0] for f in ("iwarp_rdma.term_hdrct_m", "iwarp_rdma.hdrct_d",
                                  "iwarp_rdma.hdrct_r")] == ["1", "0", "0"]
    assert judge.problems(path) == []


def test_tshark_sizes_the_terminated_ddp_header_by_etype(judge: Tshark, tmp_path: Path) -> None:
    # A quirk to know when comparing: tshark 4.0 reads 14 bytes whenever EType is 1 (its
    # "DDP tagged buffer" value), whatever the layer and the copied header's own T bit.
    conv = _accepted()
    rtr = ddp.fpdu(ddp.read_rtr())
    conv.data(False, ddp.fpdu(ddp.terminate(ddp.TermLayer.RDMAP, 1, 0, terminated=rtr)))
    path = _write(tmp_path, conv)
    (row,) = judge.fields(path, ["iwarp_rdma.term_ddp_h"], "iwarp_rdma.opcode == 7")
    assert row["iwarp_rdma.term_ddp_h"] == [rtr[2:16].hex()]
