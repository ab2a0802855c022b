"""MPA request/reply scapy layers: golden bytes both ways (spec wireshark-mpa sections
6 and 7, irdma-cm section 4), agreement with mpa_emu.wire.mpa, verdicts on bad frames."""

from __future__ import annotations

import pytest
from helpers.golden_mpa import (
    KEY_REQ_HEX,
    V1_REPLY,
    V1_REQUEST,
    V1_REQUEST_NO_CRC,
    V2_REJECT,
    V2_REPLY,
    V2_REQUEST,
    H,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.packet import Raw

from mpa_emu.frames import MPAReply, MPARequest, has_rtr_block
from mpa_emu.wire.mpa import MpaFrame, RtrBlock

untimed = settings(deadline=None)
pytestmark = pytest.mark.usefixtures("strict_dissection")
def test_v2_request_builds_the_spec_bytes() -> None:
    pkt = MPARequest(flags="CS", rev=2, ird=16, ord=16, write0=1, read0=1,
                     private_data=b"hello from initiator")
    assert bytes(pkt) == V2_REQUEST


def test_v2_request_dissects_into_rfc_6581_fields() -> None:
    pkt = MPARequest(V2_REQUEST)
    assert pkt.key == b"MPA ID Req Frame"
    assert pkt.flags == "CS" and pkt.flags_byte == 0x50 and pkt.res == 0
    assert (pkt.rev, pkt.pd_length) == (2, 24)
    assert (pkt.p2p, pkt.zero_len_send, pkt.ird) == (1, 0, 16)
    assert (pkt.write0, pkt.read0, pkt.ord) == (1, 1, 16)
    assert pkt.private_data == b"hello from initiator"
    assert pkt.rtr_block == H("8010c010")
    assert pkt.problem is None


def test_v2_reply_accepting_read0_both_ways() -> None:
    built = MPAReply(flags="CS", rev=2, ird=16, ord=16, read0=1, private_data=b"welcome")
    assert bytes(built) == V2_REPLY
    pkt = MPAReply(V2_REPLY)
    assert (pkt.read0, pkt.write0, pkt.pd_length, pkt.private_data) == (1, 0, 11, b"welcome")


def test_v2_reject_with_private_data_both_ways() -> None:
    built = MPAReply(flags="CRS", rev=2, ird=16, ord=16, read0=1, private_data=b"it's not you")
    assert bytes(built) == V2_REJECT
    pkt = MPAReply(V2_REJECT)
    assert pkt.flags.R and pkt.flags.C and pkt.flags.S and not pkt.flags.M
    assert (pkt.pd_length, pkt.private_data) == (16, b"it's not you")
    assert pkt.problem is None


@pytest.mark.parametrize(("cls", "golden", "flags"), [
    (MPARequest, V1_REQUEST, "C"),
    (MPAReply, V1_REPLY, "C"),
    (MPARequest, V1_REQUEST_NO_CRC, ""),
])
def test_v1_frames_both_ways(cls: type[MPARequest], golden: bytes, flags: str) -> None:
    assert bytes(cls(flags=flags, rev=1)) == golden
    pkt = cls(golden)
    assert (pkt.rev, pkt.pd_length, pkt.private_data) == (1, 0, b"")
    assert not has_rtr_block(pkt)
    assert pkt.problem is None


def test_default_request_is_irdma_v1_with_crc() -> None:
    assert bytes(MPARequest()) == V1_REQUEST


def test_marker_flag_and_reserved_bits_have_their_own_fields() -> None:
    pkt = MPARequest(H(KEY_REQ_HEX + "cf" "01" "0000"))
    assert pkt.flags == "MC" and pkt.res == 0x0F
    assert bytes(MPARequest(flags="MC", res=0xF)) == H(KEY_REQ_HEX + "cf" "01" "0000")


def test_rev_2_without_s_has_no_rtr_block() -> None:
    pkt = MPARequest(H(KEY_REQ_HEX + "40" "02" "0004" "8010c010"))
    assert not has_rtr_block(pkt)
    assert pkt.private_data == H("8010c010")


def test_explicit_pd_length_is_kept_on_build() -> None:
    raw = bytes(MPARequest(pd_length=600, private_data=b"abc"))
    assert raw[18:20] == H("0258") and raw[20:] == b"abc"


def test_pd_length_above_512_is_flagged_not_raised() -> None:
    pkt = MPARequest(H(KEY_REQ_HEX + "40" "01" "0258") + bytes(600))
    assert pkt.pd_length == 600
    assert "above 512" in pkt.problem and "-EOVERFLOW" in pkt.problem


def test_pd_length_larger_than_the_bytes_present_is_flagged() -> None:
    raw = H(KEY_REQ_HEX + "40" "01" "0064") + bytes(12)
    pkt = MPARequest(raw)
    assert "only 12 bytes" in pkt.problem
    assert bytes(pkt) == raw


def test_unknown_rev_is_flagged() -> None:
    pkt = MPARequest(H(KEY_REQ_HEX + "40" "03" "0000"))
    assert pkt.rev == 3 and "Rev 3 unknown" in pkt.problem


def test_wrong_key_is_flagged() -> None:
    pkt = MPARequest(V1_REPLY)
    assert "is not b'MPA ID Req Frame'" in pkt.problem


def test_v2_with_s_but_no_room_for_the_block_is_flagged() -> None:
    pkt = MPARequest(H(KEY_REQ_HEX + "50" "02" "0002" "abcd"))
    assert not has_rtr_block(pkt)
    assert pkt.private_data == H("abcd")
    assert "no room for the RFC 6581 block" in pkt.problem


def test_truncated_header_keeps_bytes_as_raw_with_a_reason() -> None:
    raw = H(KEY_REQ_HEX + "40" "01")
    pkt = MPARequest(raw)
    assert pkt.truncated and pkt.key is None
    assert pkt.problem == "truncated MPA Request: 18 bytes present, 20 needed"
    assert pkt[Raw].load == raw
    assert bytes(pkt) == raw
    assert "truncated" in pkt.show(dump=True)


def test_truncated_rtr_block_is_reported() -> None:
    pkt = MPARequest(H(KEY_REQ_HEX + "50" "02" "0008" "8010"))
    assert pkt.truncated and "22 bytes present, 24 needed" in pkt.problem


def test_show_and_ls_list_every_field() -> None:
    text = MPARequest(V2_REQUEST).show(dump=True)
    for name in ("key", "flags", "res", "rev", "pd_length", "p2p", "ird", "write0",
                 "read0", "ord", "private_data", "problem"):
        assert f"{name} " in text or f"{name}=" in text


def test_summary_names_rev_flags_and_length() -> None:
    assert MPAReply(V2_REJECT).summary() == "MPA Reply rev 2 [SRC] PD_Length 16"


rtr_blocks = st.builds(RtrBlock, ird=st.integers(0, 0x3FFF), ord=st.integers(0, 0x3FFF),
                       peer_to_peer=st.booleans(), zero_len_send=st.booleans(),
                       write0=st.booleans(), read0=st.booleans())


@st.composite
def mpa_frames(draw: st.DrawFn) -> MpaFrame:
    v2 = draw(st.booleans())
    high = draw(st.sampled_from([0x00, 0x20, 0x40, 0x60, 0x80, 0xC0, 0xE0]))
    res = draw(st.integers(0, 15))
    rtr = draw(rtr_blocks) if v2 else None
    flags = high | res | (0x10 if v2 else 0)
    rev = 2 if v2 else draw(st.sampled_from([1, 2]) if not (flags & 0x10) else st.just(1))
    return MpaFrame(request=draw(st.booleans()), rev=rev, flags=flags, rtr=rtr,
                    private_data=draw(st.binary(max_size=508)))


def _scapy_for(frame: MpaFrame) -> MPARequest:
    cls = MPARequest if frame.request else MPAReply
    extra = {}
    if frame.rtr is not None:
        extra = dict(p2p=int(frame.rtr.peer_to_peer), zero_len_send=int(frame.rtr.zero_len_send),
                     ird=frame.rtr.ird, write0=int(frame.rtr.write0),
                     read0=int(frame.rtr.read0), ord=frame.rtr.ord)
    return cls(flags=frame.flags >> 4, res=frame.flags & 0xF, rev=frame.rev,
               private_data=frame.private_data, **extra)


@untimed
@given(mpa_frames())
def test_scapy_layer_bytes_equal_mpa_frame_to_bytes(frame: MpaFrame) -> None:
    assert bytes(_scapy_for(frame)) == frame.to_bytes()


@untimed
@given(mpa_frames())
def test_build_dissect_round_trip_keeps_every_field(frame: MpaFrame) -> None:
    built = _scapy_for(frame)
    raw = bytes(built)
    again = (MPARequest if frame.request else MPAReply)(raw)
    assert again.problem is None
    assert bytes(again) == raw
    for name in ("key", "res", "rev", "private_data"):
        assert again.getfieldval(name) == built.getfieldval(name)
    assert int(again.flags) == int(built.flags)
    assert again.pd_length == len(raw) - 20
    assert again.rtr_block == (frame.rtr.to_bytes() if frame.rtr else b"")
