"""FPDU, DDP and RDMAP scapy layers: the golden FPDUs of test_ddp (hand-written headers,
CRCs tshark judged good) built from layers and dissected back, CRC verdicts, and short
or corrupt input that dissects without raising."""

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
    WRITE_RTR_FPDU,
)
from scapy.packet import Raw

from mpa_emu.frames import (
    DDP,
    MPAFPDU,
    DDPTagged,
    DDPUntagged,
    MPAMarker,
    RDMAPReadRequest,
    RDMAPTerminate,
    fpdu_wire_length,
)
from mpa_emu.wire import ddp

H = bytes.fromhex


pytestmark = pytest.mark.usefixtures("strict_dissection")


def test_read_rtr_fpdu_from_layers_is_the_golden_bytes() -> None:
    pkt = MPAFPDU(ulpdu=DDPUntagged(opcode="Read Request", qn=1, msn=1) / RDMAPReadRequest())
    assert bytes(pkt) == READ_RTR_FPDU


def test_read_rtr_fpdu_dissects_to_irdma_values() -> None:
    pkt = MPAFPDU(READ_RTR_FPDU)
    assert pkt.ulpdu_length == 46 and pkt.pad == b"" and pkt.crc == 0x5D1EAA90
    assert pkt.crc_ok is True and pkt.problem is None
    head = pkt[DDPUntagged]
    assert (head.T, head.L, head.dv, head.rv, head.opcode) == (0, 1, 1, 1, 1)
    assert (head.qn, head.msn, head.mo) == (1, 1, 0)
    rr = pkt[RDMAPReadRequest]
    assert (rr.sink_stag, rr.sink_to, rr.size, rr.src_stag, rr.src_to) == \
        (0xABCD, 0, 0, 0x1234, 0)


def test_write_rtr_fpdu_both_ways() -> None:
    assert bytes(MPAFPDU(ulpdu=DDPTagged(stag=0, to=0))) == WRITE_RTR_FPDU
    pkt = MPAFPDU(WRITE_RTR_FPDU)
    assert isinstance(pkt.ulpdu, DDPTagged)
    assert (pkt.ulpdu.T, pkt.ulpdu.opcode, pkt.ulpdu.stag, pkt.ulpdu.to) == (1, 0, 0, 0)
    assert pkt.crc_ok is True


def test_send_fpdu_computes_pad_and_keeps_the_payload() -> None:
    built = MPAFPDU(ulpdu=DDPUntagged(opcode="Send", qn=0, msn=1) / SEND_PAYLOAD)
    assert bytes(built) == SEND_FPDU
    pkt = MPAFPDU(SEND_FPDU)
    assert pkt.pad == H("000000") and pkt.crc_ok is True
    assert pkt.ulpdu[Raw].load == SEND_PAYLOAD


def test_terminate_fpdu_both_ways() -> None:
    built = MPAFPDU(ulpdu=DDPUntagged(opcode="Terminate", qn=2, msn=1) / RDMAPTerminate(
        layer="DDP", etype=2, error_code=1, M=1, D=1, ddp_segment_length=0x3B,
        ddp_header=SEND_ULPDU[:18]))
    assert bytes(built) == TERM_FPDU
    term = MPAFPDU(TERM_FPDU)[RDMAPTerminate]
    assert (term.layer, term.etype, term.error_code, term.M, term.D, term.R) == \
        (1, 2, 1, 1, 1, 0)
    assert term.ddp_segment_length == 0x3B and term.ddp_header == SEND_ULPDU[:18]


def test_layers_and_pure_builders_agree() -> None:
    assert bytes(DDP(ddp.read_rtr())) == ddp.read_rtr()
    assert bytes(DDPUntagged(opcode=4, rsvd_ulp=0x77, qn=0, msn=9, mo=3) / b"x") == \
        ddp.send(b"x", 9, 3, invalidate_stag=0x77)
    assert bytes(DDPTagged(opcode=2, stag=5, to=6, L=0) / b"yz") == \
        ddp.read_response(b"yz", 5, 6, last=False)


def test_ddp_dispatch_follows_the_t_bit() -> None:
    assert isinstance(DDP(WRITE_RTR_FPDU[2:-4]), DDPTagged)
    assert isinstance(DDP(READ_RTR_ULPDU), DDPUntagged)


def test_explicit_crc_is_kept_and_judged_bad() -> None:
    raw = bytes(MPAFPDU(ulpdu=DDP(ddp.read_rtr()), crc=0x12345678))
    assert raw[-4:] == struct.pack("<I", 0x12345678)
    pkt = MPAFPDU(raw)
    assert pkt.crc_ok is False
    assert "CRC 0x12345678 should be 0x5d1eaa90" in pkt.problem


def test_big_endian_crc_is_bad() -> None:
    raw = READ_RTR_FPDU[:-4] + READ_RTR_FPDU[-4:][::-1]
    assert MPAFPDU(raw).crc_ok is False


def test_nonzero_pad_is_flagged() -> None:
    raw = bytearray(SEND_FPDU)
    raw[-5] = 1
    body = bytes(raw[:-4])
    from mpa_emu.wire.mpa import crc32c

    pkt = MPAFPDU(body + struct.pack("<I", crc32c(body)))
    assert pkt.crc_ok is True and "PAD is not zero" in pkt.problem


def test_truncated_fpdu_keeps_its_bytes_and_says_so() -> None:
    raw = READ_RTR_FPDU[:30]
    pkt = MPAFPDU(raw)
    assert pkt.truncated
    assert pkt.problem == "truncated MPA FPDU: 30 bytes present, 52 needed"
    assert bytes(pkt) == raw and pkt[Raw].load == raw


def test_ulpdu_shorter_than_a_ddp_header_is_reported() -> None:
    ulpdu = H("4141" "0000")
    body = struct.pack("!H", len(ulpdu)) + ulpdu + b"\x00\x00"
    from mpa_emu.wire.mpa import crc32c

    pkt = MPAFPDU(body + struct.pack("<I", crc32c(body)))
    assert pkt.crc_ok is True
    assert "ULPDU: truncated DDP untagged" in pkt.problem


def test_short_read_request_body_is_reported_on_the_fpdu() -> None:
    ulpdu = READ_RTR_ULPDU[:30]
    body = struct.pack("!H", len(ulpdu)) + ulpdu
    from mpa_emu.wire.mpa import crc32c

    pkt = MPAFPDU(body + struct.pack("<I", crc32c(body)))
    assert pkt.crc_ok is True
    assert "ULPDU: truncated RDMAP Read Request: 12 bytes present, 28 needed" in pkt.problem


def test_unexpected_versions_and_models_are_flagged() -> None:
    bad = bytearray(ddp.read_rtr())
    bad[0] = 0x42  # DV 2
    bad[1] = 0x00  # RV 0, opcode Write in the untagged model
    problem = DDP(bytes(bad)).problem
    assert "DDP version 2" in problem and "RDMAP version 0" in problem
    assert "Write in the untagged model" in problem


def test_coalesced_fpdus_stack() -> None:
    pkt = MPAFPDU(READ_RTR_FPDU + SEND_FPDU)
    second = pkt.payload
    assert isinstance(second, MPAFPDU) and second.crc_ok is True
    assert bytes(pkt) == READ_RTR_FPDU + SEND_FPDU


def test_fpdu_wire_length_counts_pad_and_crc() -> None:
    assert fpdu_wire_length(46) == 52
    assert fpdu_wire_length(59) == len(SEND_FPDU)


def test_marker_layer_is_reserved_then_fpduptr() -> None:
    assert bytes(MPAMarker(fpduptr=0x1F4)) == H("000001f4")
    assert MPAMarker(H("000001f4")).fpduptr == 500


def test_summary_names_the_rdmap_message_and_crc() -> None:
    assert MPAFPDU(READ_RTR_FPDU).summary() == \
        "MPA FPDU Read Request ULPDU_Length 46 CRC good"
