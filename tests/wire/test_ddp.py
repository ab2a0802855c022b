"""DDP/RDMAP header values (mpa_emu.wire.ddp): golden bytes written out field by field from
the RFC 5040/5041 layouts, CRCs as tshark 4.0 judged them "Good CRC32", round trips."""

from __future__ import annotations

import struct

import pytest
from helpers.golden_ddp import (
    READ_RTR_FPDU,
    READ_RTR_ULPDU,
    SEND_FPDU,
    SEND_PAYLOAD,
    SEND_ULPDU,
    TERM_FPDU,
    TERM_ULPDU,
    WRITE_RTR_FPDU,
    WRITE_RTR_ULPDU,
    H,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from mpa_emu.wire import ddp
from mpa_emu.wire.mpa import crc32c, frame_fpdu

untimed = settings(deadline=None)
def test_crc32c_is_the_castagnoli_check_value() -> None:
    # The published CRC-32C check value for "123456789" (RFC 3720 appendix B.4 family).
    assert crc32c(b"123456789") == 0xE3069283


def test_fpdu_crc_is_the_standard_value_written_little_endian() -> None:
    body = READ_RTR_FPDU[:-4]
    assert READ_RTR_FPDU[-4:] == struct.pack("<I", crc32c(body))


def test_read_rtr_matches_irdma_rtt_read0() -> None:
    assert ddp.read_rtr() == READ_RTR_ULPDU
    assert ddp.fpdu(ddp.read_rtr()) == READ_RTR_FPDU


def test_write_rtr_is_a_zero_length_tagged_write() -> None:
    assert ddp.write_rtr() == WRITE_RTR_ULPDU
    assert ddp.fpdu(ddp.write_rtr()) == WRITE_RTR_FPDU


def test_send_is_untagged_queue_zero_with_pad() -> None:
    assert ddp.send(SEND_PAYLOAD, msn=1) == SEND_ULPDU
    assert ddp.fpdu(ddp.send(SEND_PAYLOAD, msn=1)) == SEND_FPDU


def test_send_variants_pick_the_rfc_5040_opcodes() -> None:
    assert ddp.send(b"", msn=1, solicited=True)[1] == 0x45
    inval = ddp.send(b"", msn=7, invalidate_stag=0xDEADBEEF)
    assert inval[1] == 0x44
    assert inval[2:6] == H("deadbeef")
    assert ddp.send(b"", msn=7, solicited=True, invalidate_stag=1)[1] == 0x46


def test_terminate_copies_the_offending_length_and_ddp_header() -> None:
    offending = SEND_FPDU[:2] + SEND_ULPDU
    built = ddp.terminate(ddp.TermLayer.DDP, 2, 1, terminated=offending)
    assert built == TERM_ULPDU
    assert ddp.fpdu(built) == TERM_FPDU


def test_terminate_of_a_read_request_includes_its_rdmap_header() -> None:
    offending = READ_RTR_FPDU[:2] + READ_RTR_ULPDU
    seg = ddp.parse_segment(ddp.terminate(ddp.TermLayer.RDMAP, 1, 0, terminated=offending))
    assert seg.terminate is not None
    assert seg.terminate.hdrct == 0xE0
    assert seg.terminate.ddp_header == READ_RTR_ULPDU[:18]
    assert seg.terminate.rdmap_header == READ_RTR_ULPDU[18:]


def test_terminate_of_a_short_segment_copies_only_the_length() -> None:
    # irdma_bld_termhdr_ddp_rdma: ULPDU_LENGTH 10 covers no DDP header: M alone, 2 bytes.
    built = ddp.terminate(ddp.TermLayer.DDP, 2, 1, terminated=H("000a") + bytes(10))
    assert built[18:] == H("12018000" "000a")
    assert ddp.parse_segment(built).terminate == ddp.TerminateHeader(
        1, 2, 1, m=True, ddp_segment_length=10)


def test_terminate_of_a_zero_length_segment_copies_nothing() -> None:
    built = ddp.terminate(ddp.TermLayer.DDP, 1, 0, terminated=H("0000") + bytes(14))
    assert built[18:] == H("11000000")


def test_terminate_refuses_a_segment_shorter_than_its_copy() -> None:
    with pytest.raises(ddp.DdpFormatError, match="18 needed"):
        ddp.terminate(1, 2, 1, terminated=SEND_FPDU[:2] + SEND_ULPDU[:10])


def test_terminate_without_headers_is_four_bytes_of_control() -> None:
    built = ddp.terminate(ddp.TermLayer.LLP, 0, 0x07)
    assert built[18:] == H("20070000")


def test_parse_segment_reads_each_golden_frame() -> None:
    rtr = ddp.parse_segment(READ_RTR_ULPDU)
    assert isinstance(rtr.header, ddp.UntaggedHeader)
    assert (rtr.opcode, rtr.header.qn, rtr.header.msn) == (ddp.Opcode.READ_REQUEST, 1, 1)
    assert rtr.read_request == ddp.ReadRequest(0xABCD, 0, 0, 0x1234, 0)
    write = ddp.parse_segment(WRITE_RTR_ULPDU)
    assert write.tagged and write.header == ddp.TaggedHeader(ddp.Opcode.WRITE, 0, 0)
    send = ddp.parse_segment(SEND_ULPDU)
    assert send.payload == SEND_PAYLOAD and not send.tagged
    term = ddp.parse_segment(TERM_ULPDU)
    assert term.terminate == ddp.TerminateHeader(
        layer=1, etype=2, error_code=1, m=True, ddp_segment_length=0x3B,
        ddp_header=SEND_ULPDU[:18])


@pytest.mark.parametrize("raw", [b"", READ_RTR_ULPDU[:17], WRITE_RTR_ULPDU[:13],
                                 READ_RTR_ULPDU[:45], TERM_ULPDU[:30]])
def test_short_segments_raise_ddp_format_error(raw: bytes) -> None:
    with pytest.raises(ddp.DdpFormatError):
        ddp.parse_segment(raw)


def test_header_parsers_refuse_the_other_buffer_model() -> None:
    with pytest.raises(ddp.DdpFormatError, match="untagged"):
        ddp.TaggedHeader.from_bytes(READ_RTR_ULPDU)
    with pytest.raises(ddp.DdpFormatError, match="tagged"):
        ddp.UntaggedHeader.from_bytes(WRITE_RTR_ULPDU + bytes(4))


u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)


@untimed
@given(opcode=st.integers(0, 15), stag=u32, to=u64, last=st.booleans(),
       dv=st.integers(0, 3), rv=st.integers(0, 3), dres=st.integers(0, 15),
       rres=st.integers(0, 3))
def test_tagged_header_round_trips(opcode: int, stag: int, to: int, last: bool, dv: int,
                                   rv: int, dres: int, rres: int) -> None:
    head = ddp.TaggedHeader(opcode, stag, to, last, dv, rv, dres, rres)
    raw = head.to_bytes()
    assert len(raw) == ddp.TAGGED_HEADER_LEN
    assert ddp.TaggedHeader.from_bytes(raw) == head


@untimed
@given(opcode=st.integers(0, 15), qn=u32, msn=u32, mo=u32, last=st.booleans(), ulp=u32)
def test_untagged_header_round_trips(opcode: int, qn: int, msn: int, mo: int, last: bool,
                                     ulp: int) -> None:
    head = ddp.UntaggedHeader(opcode, qn, msn, mo, last, ulp)
    raw = head.to_bytes()
    assert len(raw) == ddp.UNTAGGED_HEADER_LEN
    assert ddp.UntaggedHeader.from_bytes(raw) == head


@untimed
@given(sink=u32, sink_to=u64, size=u32, src=u32, src_to=u64)
def test_read_request_round_trips(sink: int, sink_to: int, size: int, src: int,
                                  src_to: int) -> None:
    rr = ddp.ReadRequest(sink, sink_to, size, src, src_to)
    assert ddp.ReadRequest.from_bytes(rr.to_bytes()) == rr


@untimed
@given(layer=st.integers(0, 15), etype=st.integers(0, 15), code=st.integers(0, 255),
       m=st.booleans(), seg=st.integers(0, 0xFFFF), tagged=st.booleans(),
       with_ddp=st.booleans(), rdmap=st.one_of(st.none(), st.binary(min_size=28, max_size=28)),
       reserved=st.integers(0, 0x1FFF))
def test_terminate_header_round_trips(layer: int, etype: int, code: int, m: bool, seg: int,
                                      tagged: bool, with_ddp: bool, rdmap: bytes | None,
                                      reserved: int) -> None:
    header = (WRITE_RTR_ULPDU if tagged else SEND_ULPDU[:18]) if with_ddp else None
    term = ddp.TerminateHeader(layer, etype, code, m, seg if (m or with_ddp) else 0, header,
                               rdmap, reserved)
    assert ddp.TerminateHeader.from_bytes(term.to_bytes()) == term


@untimed
@given(payload=st.binary(max_size=300), msn=u32, mo=u32)
def test_send_fpdu_round_trips_through_mpa_framing(payload: bytes, msn: int, mo: int) -> None:
    from mpa_emu.wire.mpa import unframe_fpdu

    fpdu = unframe_fpdu(frame_fpdu(ddp.send(payload, msn, mo)))
    assert fpdu.crc_ok
    seg = ddp.parse_segment(fpdu.ulpdu)
    assert seg.payload == payload
    assert isinstance(seg.header, ddp.UntaggedHeader)
    assert (seg.header.qn, seg.header.msn, seg.header.mo) == (0, msn, mo)


@untimed
@given(payload=st.binary(max_size=40), msn=u32, mo=u32, last=st.booleans(),
       solicited=st.booleans(), inval=st.one_of(st.none(), u32))
def test_send_builder_equals_the_header_value(payload: bytes, msn: int, mo: int, last: bool,
                                              solicited: bool, inval: int | None) -> None:
    if inval is None:
        opcode = ddp.Opcode.SEND_SE if solicited else ddp.Opcode.SEND
    else:
        opcode = ddp.Opcode.SEND_SE_INVALIDATE if solicited else ddp.Opcode.SEND_INVALIDATE
    head = ddp.UntaggedHeader(opcode, ddp.QN_SEND, msn, mo, last, inval or 0)
    built = ddp.send(payload, msn, mo, last=last, solicited=solicited, invalidate_stag=inval)
    assert built == head.to_bytes() + payload


@untimed
@given(payload=st.binary(max_size=40), stag=u32, to=u64, last=st.booleans())
def test_tagged_builders_equal_the_header_value(payload: bytes, stag: int, to: int,
                                                last: bool) -> None:
    write = ddp.TaggedHeader(ddp.Opcode.WRITE, stag, to, last).to_bytes()
    resp = ddp.TaggedHeader(ddp.Opcode.READ_RESPONSE, stag, to, last).to_bytes()
    assert ddp.rdma_write(payload, stag, to, last=last) == write + payload
    assert ddp.read_response(payload, stag, to, last=last) == resp + payload


@untimed
@given(msn=u32)
def test_read_rtr_builder_equals_the_header_values(msn: int) -> None:
    head = ddp.UntaggedHeader(ddp.Opcode.READ_REQUEST, ddp.QN_READ_REQUEST, msn)
    body = ddp.ReadRequest(0xABCD, 0, 0, 0x1234, 0)
    assert ddp.read_rtr(msn) == head.to_bytes() + body.to_bytes()
